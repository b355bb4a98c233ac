"""Scripted experts for registry arms that grasp by friction (the Panda, the SO-101).

A per-world phase machine over a :class:`tasks.env.VecEnv`, closed loop on the observed prop pose
at the start of every phase (never open loop from tick 0):

    approach   IK to a pre-grasp pose above the prop (gripper open), yaw matched to the prop's
    descend    re-observe the prop, IK to the grasp (the grasp point -- the TCP moved by the
               profile's grasp_offset -- at the prop centre), straight down along
               the gripper's approach axis, slower
    close      command the gripper closed (a step, or a ramp over the profile's close_s); the
               phase ends when the finger stops (opening unchanged
               for STOP_TICKS ticks: on the prop's faces, or at the finger stop when it missed)
    lift       IK to the grasp raised by the profile's lift_m (pre_m, carry_z: the other heights)
    carry      (a zone or stack task) IK above the zone centre -- a stack: above the prop below,
               observed now -- at the carry height
    lower      re-observe the prop in the hand (its offset from the TCP) and the prop below, and
               lower it so that it lands on the zone's centre RELEASE_GAP_M above the ground (a
               stack: centred on the prop below, RELEASE_GAP_M above its top face)
    release    open the gripper, wait RELEASE_S
    retreat    IK straight up by the pre-grasp height, then hold

An insertion task (``"expert": "insert"``: a peg into a hole, the success zone inside the hole)
runs the same phases with two changes: at the end of the lift the hand turns so that the prop it
holds (its yaw observed now) lines up with the world axes, which the zone's -- and the hole's --
faces follow; before the lowering, the prop's bottom-face centre (not its centre: a tilted peg)
is put over the zone's centre.

A push task (``"expert": "push"`` in the task file) runs instead, gripper closed:

    approach   IK above the pre-push point: behind the prop on the line from its centre to the
               zone's centre, the closed gripper's pushing face (the profile's push_yaw,
               push_center, push_half: the Panda's pads' x face, the SO-101's jaws' y faces side by
               side) towards the prop
    lower      down to the prop's centre height
    push       re-observe the prop and push its centre to the zone's centre along that line (IK at
               PUSH_POINTS points of the straight line, one quintic time law over them)
    retreat    back off PUSH_BACK_M and up; then, if the prop's centre (observed now) is more than
               PUSH_TOL_M from the zone's centre, push again from behind it (approach, lower, push,
               retreat), at most PUSH_TRIES strokes in all; then hold

A reach task (a ``reached`` success: the gripper point -- the jaw box centre -- on a goal above a
marker prop) runs instead, the gripper held at its start opening:

    approach   observe the marker, IK putting the gripper point on the goal (the hand pointing
               down, yawed as for a grasp; on a 5-dof arm orientation is traded for position)
    settle     hold REACH_SETTLE_S
    correct    re-observe the marker (re-solve when it moved) and the joints; move to the goal
               configuration plus the servos' steady error (the measured gripper point, by FK,
               more than REACH_TOL_M off the goal: gravity sag on an arm without gravcomp); hold

Every move is one minimum-jerk (quintic) joint-space segment, rest to rest, timed so that no joint
exceeds SPEED of its velocity limit (a quintic's peak speed is 15/8 of its mean). IK is the
project's numerical solver (:func:`caliper_jax.ik.ik`) on a fixed batch shape, so it compiles once
per process; nothing rebuilds or recompiles a scene between episodes.
"""
from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError

SPEED = 0.5            # fraction of the joint velocity limits on free moves
SLOW = 0.15            # fraction on the descent and the lowering
RELEASE_GAP_M = 0.004  # prop bottom above the ground when released (m)
RETREAT_M = 0.10       # (m) push: how far the hand rises after a stroke
RELEASE_S = 0.4
STOP_TICKS = 4         # ticks of an unchanged finger opening that end the close phase
STOP_EPS = 2e-4        # (m or rad) "unchanged"
MAX_CLOSE_S = 1.0
PUSH_GAP_M = 0.02      # pre-push clearance between the pads and the prop
PUSH_POINTS = 8
IK_ROT_FALLBACK = (0.1, 0.01)  # rotation weights of the IK retries when the exact pose is out of reach
IK_POS_TOL = 1e-3      # (m) position error a retry may leave
PUSH_BACK_M = 0.03
PUSH_TOL_M = 0.015     # a pushed prop this far (or more) from the zone centre gets another stroke
PUSH_TRIES = 3         # strokes per episode at most
PUSH_SEGMENTS = 10     # re-aims per stroke at most (a profile with push_segment)
REAIM_GAP_M = 0.005    # (m) pusher-to-prop clearance after a re-aim
REACH_SETTLE_S = 0.2   # (s) reach: hold after the approach before the correction
REACH_TOL_M = 0.002    # (m) reach: a measured gripper point this far from the goal gets a correction
REACH_MOVED_M = 0.002  # (m) reach: a marker that moved this far since the approach gets a new IK


def _min_jerk(qa, qb, vmax, fps: int, scale: float) -> np.ndarray:
    """(n, nq) rows every 1/fps from qa to qb (qa excluded, qb included) on a quintic time law."""
    dq = np.abs(qb - qa)
    T = max(1.875 * float(np.max(dq / (scale * vmax))), 2.0 / fps)
    n = max(int(np.ceil(T * fps)), 1)
    s = np.arange(1, n + 1) / n
    blend = s ** 3 * (10 - 15 * s + 6 * s * s)
    return qa + (qb - qa) * blend[:, None]


def _along(points, fps: int, vmax, scale: float) -> np.ndarray:
    """(n, nq) rows through the joint waypoints ``points`` (K, nq), piecewise linear in joint space
    on one quintic time law (rest at both ends), no joint above ``scale`` of its limit."""
    seg = np.abs(np.diff(points, axis=0))
    length = np.concatenate([[0.0], np.cumsum(np.max(seg / (scale * vmax), axis=1))])
    T = max(1.875 * float(length[-1]), 2.0 / fps)
    n = max(int(np.ceil(T * fps)), 1)
    s = np.arange(1, n + 1) / n
    u = length[-1] * s ** 3 * (10 - 15 * s + 6 * s * s)
    return np.stack([np.interp(u, length, points[:, j]) for j in range(points.shape[1])], axis=1)


def _yaw(quat) -> float:
    """Yaw about world z (rad) of the orientation ``quat`` (w, x, y, z)."""
    w, x, y, z = quat
    return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def _fold(angle) -> float:
    """``angle`` folded into [-45, 45) deg (a box looks the same every 90 deg about z)."""
    return float((angle + np.pi / 4) % (np.pi / 2) - np.pi / 4)


def _leaf_of(pred):
    """(scored prop, zone or None, the prop it is stacked on or None) of a lift, place or stack
    predicate (the first leaf that names a prop)."""
    from tasks.schema import AllOf, AnyOf, PlacedInZone, Reached, Stacked

    if isinstance(pred, Reached):
        return pred.prop, None, None

    if isinstance(pred, (AllOf, AnyOf)):
        return _leaf_of(pred.terms[0])
    return (pred.prop, pred.zone if isinstance(pred, PlacedInZone) else None,
            pred.on if isinstance(pred, Stacked) else None)


class ArmExpert:
    """A host-side policy: ``act(obs, info)`` -> (W, nq) joint targets for a friction-grasp task."""

    def __init__(self, env):
        import jax
        import jax.numpy as jnp

        from caliper_jax.kinematics import frame_pose

        ts = env.task_scene
        if ts.profile is None or ts.task.success is None:
            raise CaliperError(f"task {ts.name}: the arm expert needs a registry arm and a success predicate")
        self.env, self.ts, self.layout, self.profile = env, ts, env.layout, ts.profile
        model = ts.model
        self.model = model
        prop, self.zone, on = _leaf_of(ts.task.success)
        self.prop = list(ts.prop_names).index(prop)
        self.on = None if on is None else list(ts.prop_names).index(on)    # a stack: the prop below
        self.rise = getattr(ts.task.success, "rise", 0.0)
        self.half = np.asarray(ts.task.props[self.prop].size, np.float64)
        skill = getattr(ts.task, "expert", None)
        self.push, self.insert = skill == "push", skill == "insert"
        from tasks.schema import Reached

        self.reach = isinstance(ts.task.success, Reached)
        self.above = float(getattr(ts.task.success, "above", 0.0))
        if (self.push or self.insert) and self.zone is None:
            raise CaliperError(f"task {ts.name}: a {skill} expert needs a zone in the success predicate")
        self.ground = 0.0 if ts.task.ground is None else float(ts.task.ground)
        self.vmax = np.asarray(model.dof_velocity_limit, np.float64)
        if self.profile.vmax is not None:        # the URDF's limit is above what the servo does
            self.vmax = np.minimum(self.vmax, self.profile.vmax)
        self.fps = env.layout.fps
        self.finger = ts.gripper.q_index
        prof = self.profile
        self.open = ts.gripper.open if prof.open_q is None else float(prof.open_q)
        self.closed = ts.gripper.closed
        self.pre_m, self.lift_m, self.carry_z = prof.pre_m, prof.lift_m, prof.carry_z
        self.offset = np.asarray(prof.grasp_offset, np.float64)
        self.push_offset = self.offset + np.asarray(prof.push_center, np.float64)   # TCP frame
        frame = list(model.frame_names).index(self.profile.tcp)
        self._fk = jax.jit(lambda q: frame_pose(model, q, frame))
        self._jnp = jnp
        if self.reach:      # the gripper point in the TCP frame at the start opening (held all along)
            self.hold_q = float(np.asarray(ts.q0, np.float64)[self.finger])
            self.grip_offset = self._grip_offset(np.asarray(ts.q0, np.float64))
        W = env.num_envs
        self.phase = ["start"] * W
        self.rows: list = [None] * W
        self.k = np.zeros(W, np.int64)
        self.yaw = np.zeros(W)
        self.still = np.zeros(W, np.int64)
        self.last_open = np.zeros(W)
        self.strokes = np.zeros(W, np.int64)
        self.goal_of = np.zeros((W, 3))
        self.segs = np.zeros(W, np.int64)         # push: segments of this stroke
        self._dir = np.zeros((W, 3))              # push: the line being pushed along
        self.failed_plans: list[tuple[int, int, str]] = []

    # ---- kinematics ----------------------------------------------------------------------------
    def tcp(self, q) -> np.ndarray:
        """(4, 4) world pose of the grasp point at q (nq,): the TCP frame moved by the profile's
        ``grasp_offset`` (where a held prop's centre sits; the Panda's is the TCP itself)."""
        T = np.asarray(self._fk(self._jnp.asarray(q, self.model.dtype)), np.float64)
        T[:3, 3] += T[:3, :3] @ self.offset
        return T

    def _point(self, q, offset) -> np.ndarray:
        """(3,) world position of the point at ``offset`` (3,) in the TCP frame at q (nq,)."""
        T = np.asarray(self._fk(self._jnp.asarray(q, self.model.dtype)), np.float64)
        return T[:3, 3] + T[:3, :3] @ offset

    def _grip_offset(self, q) -> np.ndarray:
        """(3,) the gripper point (the jaw box centre, :func:`tasks.witness.grip_of`) in the TCP frame
        at q (nq,): constant while the gripper joint keeps its value."""
        from tasks.witness import _Kin, grip_of

        kin = _Kin(self.ts)
        kin.set(q)
        T = np.asarray(self._fk(self._jnp.asarray(q, self.model.dtype)), np.float64)
        return T[:3, :3].T @ (grip_of(self.ts, kin.d) - T[:3, 3])

    def _target(self, p, yaw) -> np.ndarray:
        """TCP pose at p (3,): approach axis down (world -z), fingers closing along the prop's yaw."""
        c, s = np.cos(yaw), np.sin(yaw)
        T = np.eye(4)
        T[:3, :3] = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ np.diag([1.0, -1.0, -1.0])
        T[:3, 3] = p
        return T

    def _ik(self, p, yaw, seed, offset=None) -> np.ndarray:
        """(nq,) joints putting the grasp point (or the point at ``offset`` (3,) in the TCP frame)
        at p with the gripper yaw, seeded at ``seed``."""
        from caliper_jax.ik import ik

        T = self._target(p, yaw)
        T[:3, 3] -= T[:3, :3] @ (self.offset if offset is None else offset)   # the TCP frame's pose
        kw = dict(frame=self.profile.tcp, seed_q=seed[None], locked=(self.ts.model.joint_names[self.finger],),
                  key=0)
        sol = ik(self.model, T[None], **kw)
        for weight in IK_ROT_FALLBACK:
            if bool(sol.success[0]):
                break
            # a 5-dof arm may not reach the exact top-down pose: trade orientation for position
            sol = ik(self.model, T[None], rot_weight=weight, **kw)
            if float(sol.pos_residual[0]) <= IK_POS_TOL:
                break
        else:
            raise CaliperError(f"no IK solution for the TCP at {np.round(T[:3, 3], 3).tolist()}")
        return np.asarray(sol.q[0], np.float64)

    def _prop_yaw(self, quat, pos) -> float:
        """The hand's yaw for a box at ``pos`` with orientation ``quat``: the box's yaw about world z
        folded to within 45 deg of the arm's natural hand yaw (a box's grasp repeats every 90 deg): 0
        for the Panda, the bearing from the base to the prop plus pi for an arm that turns its hand
        with its pan joint (``yaw_from_base``)."""
        yaw = _yaw(quat)
        base = np.asarray(self.profile.base, np.float64)
        nat = 0.0
        if self.profile.yaw_from_base:
            nat = float(np.arctan2(pos[1] - base[1], pos[0] - base[0]) + np.pi)
        return float(nat + _fold(yaw - nat))

    @property
    def _places(self) -> bool:
        """The task puts the prop somewhere (a zone, or on another prop), not only lifts it."""
        return self.zone is not None or self.on is not None

    def _land(self, parts: dict, w: int) -> np.ndarray:
        """(3,) where the carried prop's centre is let go, RELEASE_GAP_M above its support: the
        zone's centre on the ground, or (a stack) the observed centre of the prop below, raised by
        the stack's rise (the two half heights)."""
        if self.on is not None:
            b = parts["prop_pos"][w, self.on]
            return np.array([b[0], b[1], b[2] + self.rise + RELEASE_GAP_M])
        c = np.asarray(self.zone.center, np.float64)
        return np.array([c[0], c[1], self.ground + self.half[2] + RELEASE_GAP_M])

    # ---- the phase machine ---------------------------------------------------------------------
    def act(self, obs, info) -> np.ndarray:
        from tasks.env_spec import observation_parts

        parts = observation_parts(self.layout, np.asarray(obs, np.float64))
        ticks = np.asarray(info["episode"]["tick"])
        out = np.empty((len(ticks), self.layout.nq))
        for w, t in enumerate(ticks):
            if t == 0:
                self.phase[w], self.rows[w], self.strokes[w] = "start", None, 0
            rows = self.rows[w]
            if rows is None or self.k[w] >= len(rows) or self.phase[w] == "close":
                if self._advance(w, parts, info):
                    rows = self.rows[w]
            rows = self.rows[w]
            out[w] = rows[min(self.k[w], len(rows) - 1)]
            self.k[w] += 1
        return out

    def _plan(self, w, phase, rows) -> bool:
        self.phase[w], self.rows[w], self.k[w] = phase, np.atleast_2d(rows), 0
        return True

    def _advance(self, w: int, parts: dict, info) -> bool:
        """Move world ``w`` to its next phase from what it observes now."""
        q = parts["q"][w].copy()
        pos, quat = parts["prop_pos"][w, self.prop], parts["prop_quat"][w, self.prop]
        phase = self.phase[w]
        try:
            if self.push:
                return self._advance_push(w, q, pos, phase)
            if self.reach:
                return self._advance_reach(w, q, pos, quat, phase)
            if phase == "start":
                self.yaw[w] = self._prop_yaw(quat, pos)
                q[self.finger] = self.open
                goal = self._ik(pos + [0, 0, self.pre_m], self.yaw[w], q)
                goal[self.finger] = self.open
                return self._plan(w, "approach", _min_jerk(q, goal, self.vmax, self.fps, SPEED))
            if phase == "approach":
                self.yaw[w] = self._prop_yaw(quat, pos)
                cur = self.rows[w][-1]
                goal = self._ik(pos, self.yaw[w], cur)
                goal[self.finger] = self.open
                return self._plan(w, "descend", _min_jerk(cur, goal, self.vmax, self.fps, SLOW))
            if phase == "descend":
                self.still[w], self.last_open[w] = 0, parts["q"][w, self.finger]
                row = self.rows[w][-1].copy()
                n = max(1, round(self.profile.close_s * self.fps))
                rows = np.repeat(row[None], n, 0)
                ramp = np.arange(1, n + 1) / n
                rows[:, self.finger] = row[self.finger] + (self.closed - row[self.finger]) * ramp
                return self._plan(w, "close", rows)
            if phase == "close":
                opening = parts["q"][w, self.finger]
                moved = abs(opening - self.last_open[w]) > STOP_EPS
                self.still[w] = 0 if moved else self.still[w] + 1
                self.last_open[w] = opening
                if self.still[w] < STOP_TICKS and self.k[w] < MAX_CLOSE_S * self.fps:
                    return False
                cur = self.rows[w][-1]
                tcp = self.tcp(cur)[:3, 3]
                up = tcp + [0, 0, self.lift_m] if not self._places else np.array([*tcp[:2], self.carry_z])
                goal = self._ik(up, self.yaw[w], cur)
                goal[self.finger] = self.closed
                return self._plan(w, "lift", _min_jerk(cur, goal, self.vmax, self.fps, SPEED))
            if phase == "lift" and self._places:
                cur = self.rows[w][-1]
                if self.insert:        # turn the hand so that the prop in it lines up with the world axes
                    self.yaw[w] = -_fold(_yaw(quat) - self.yaw[w])
                c = self._land(parts, w)
                goal = self._ik(np.array([c[0], c[1], self.carry_z]), self.yaw[w], cur)
                goal[self.finger] = self.closed
                return self._plan(w, "carry", _min_jerk(cur, goal, self.vmax, self.fps, SPEED))
            if phase == "carry":
                cur = self.rows[w][-1]
                offset = pos - self.tcp(q)[:3, 3]              # the prop in the hand, observed now
                if self.insert:        # the bottom face's centre goes over the hole (a tilted peg)
                    from caliper_jax.io.rotations import quat_to_mat

                    R = np.asarray(quat_to_mat(np.asarray(quat, np.float64)[None]))[0]
                    offset[:2] = (pos - R[:, 2] * self.half[2])[:2] - self.tcp(q)[:3, 3][:2]
                goal = self._ik(self._land(parts, w) - offset, self.yaw[w], cur)
                goal[self.finger] = self.closed
                return self._plan(w, "lower", _min_jerk(cur, goal, self.vmax, self.fps, SLOW))
            if phase == "lower":
                row = self.rows[w][-1].copy()
                row[self.finger] = self.open
                return self._plan(w, "release", np.repeat(row[None], round(RELEASE_S * self.fps), 0))
            if phase == "release":
                cur = self.rows[w][-1]
                goal = self._ik(self.tcp(cur)[:3, 3] + [0, 0, self.pre_m], self.yaw[w], cur)
                goal[self.finger] = self.open
                return self._plan(w, "retreat", _min_jerk(cur, goal, self.vmax, self.fps, SPEED))
        except CaliperError as exc:
            self.failed_plans.append((w, int(info["episode"]["index"][w]), f"{phase}: {exc}"))
            return self._plan(w, "hold", q)
        return self._plan(w, "hold", self.rows[w][-1])

    def _reach_ik(self, w: int, goal, seed) -> np.ndarray:
        """(nq,) joints putting the gripper point on ``goal`` (3,), the hand down at world ``w``'s yaw,
        or turned by pi when that fails (the gripper point is off the TCP's axis, so the turn moves
        the wrist: near the base only one of the two fits); the gripper at its start opening."""
        seed = seed.copy()
        seed[self.finger] = self.hold_q
        try:
            qg = self._ik(goal, self.yaw[w], seed, self.grip_offset)
        except CaliperError:
            self.yaw[w] = (self.yaw[w] + np.pi + np.pi) % (2 * np.pi) - np.pi
            qg = self._ik(goal, self.yaw[w], seed, self.grip_offset)
        qg[self.finger] = self.hold_q
        return qg

    def _advance_reach(self, w: int, q, pos, quat, phase) -> bool:
        """The reach phases (module docstring): the gripper point onto the goal above the marker."""
        goal = pos + [0.0, 0.0, self.above]
        if phase == "start":
            self.yaw[w] = self._prop_yaw(quat, pos)
            q = q.copy()
            q[self.finger] = self.hold_q
            qg = self._reach_ik(w, goal, q)
            self.goal_of[w] = goal
            return self._plan(w, "approach", _min_jerk(q, qg, self.vmax, self.fps, SPEED))
        if phase == "approach":
            row = self.rows[w][-1]
            return self._plan(w, "settle", np.repeat(row[None], max(1, round(REACH_SETTLE_S * self.fps)), 0))
        if phase == "settle":
            cur = self.rows[w][-1]
            qg = cur
            if np.linalg.norm(goal - self.goal_of[w]) > REACH_MOVED_M:     # the marker was knocked
                qg = self._reach_ik(w, goal, cur)
                self.goal_of[w] = goal
            grip = self._point(q, self.grip_offset)                # measured, by FK
            if np.linalg.norm(grip - goal) <= REACH_TOL_M and qg is cur:
                return self._plan(w, "hold", cur)
            arm = np.arange(len(cur)) != self.finger
            target = qg.copy()
            target[arm] += (cur - q)[arm]                      # the servos' steady error, added back
            return self._plan(w, "correct", _min_jerk(cur, target, self.vmax, self.fps, SLOW))
        return self._plan(w, "hold", self.rows[w][-1])

    def _push_line(self, pos):
        """(unit push direction (3,), yaw of the hand, start (3,), end (3,)) for a prop at pos: the
        start and end of the pushing face's centre (the profile's push_center, :attr:`push_offset`)."""
        prof = self.profile
        c = np.asarray(self.zone.center, np.float64)
        d = np.array([c[0] - pos[0], c[1] - pos[1], 0.0])
        d /= max(np.linalg.norm(d), 1e-9)
        yaw = float(np.arctan2(d[1], d[0])) + prof.push_yaw
        if prof.push_symmetric:                                # the hand turned by pi pushes too
            yaw = (yaw + np.pi / 2) % np.pi - np.pi / 2
        back = float(abs(d[:2]) @ self.half[:2]) + prof.push_half   # prop centre to its face, plus the pusher
        z = pos[2]
        start = np.array([pos[0], pos[1], z]) - d * (back + PUSH_GAP_M)
        end = np.array([c[0], c[1], z]) - d * back
        return d, yaw, start, end

    def _advance_push(self, w: int, q, pos, phase) -> bool:
        q = q.copy()
        q[self.finger] = self.closed
        c = np.asarray(self.zone.center, np.float64)
        if phase == "retreat" and self.strokes[w] < PUSH_TRIES and np.hypot(*(pos[:2] - c[:2])) > PUSH_TOL_M:
            phase = "start"                                    # off centre: another stroke from behind
        if phase == "start":
            self.strokes[w] += 1
            self.segs[w] = 0
            _, self.yaw[w], start, _ = self._push_line(pos)
            goal = self._ik(start + [0, 0, self.pre_m], self.yaw[w], q, self.push_offset)
            goal[self.finger] = self.closed
            return self._plan(w, "approach", _min_jerk(q, goal, self.vmax, self.fps, SPEED))
        if phase == "approach":
            self._dir[w], self.yaw[w], start, _ = self._push_line(pos)
            cur = self.rows[w][-1]
            goal = self._ik(start, self.yaw[w], cur, self.push_offset)
            goal[self.finger] = self.closed
            return self._plan(w, "lower", _min_jerk(cur, goal, self.vmax, self.fps, SLOW))
        if phase == "lower":
            _, _, _, end = self._push_line(pos)
            cur = self.rows[w][-1]
            tcp = self._point(cur, self.push_offset)
            seg, left = self.profile.push_segment, float(np.linalg.norm(end - tcp))
            if seg is not None and left > seg:                 # a segment, then re-aim
                end = tcp + (end - tcp) * (seg / left)
            pts, seed = [cur], cur
            for s in np.linspace(0.0, 1.0, PUSH_POINTS + 1)[1:]:
                seed = self._ik(tcp + s * (end - tcp), self.yaw[w], seed, self.push_offset)
                seed[self.finger] = self.closed
                pts.append(seed)
            return self._plan(w, "push", _along(np.array(pts), self.fps, self.vmax, SLOW))
        if phase == "push" and self.profile.push_segment is not None and self.segs[w] < PUSH_SEGMENTS \
                and np.hypot(*(pos[:2] - c[:2])) > PUSH_TOL_M:
            # re-aim at the table: back off along the last line, then behind the prop observed now
            self.segs[w] += 1
            cur = self.rows[w][-1]
            old = self._point(cur, self.push_offset)
            d_old = self._dir[w]
            back = self._ik(old - d_old * PUSH_GAP_M, self.yaw[w], cur, self.push_offset)
            d, self.yaw[w], start, _ = self._push_line(pos)
            self._dir[w] = d
            goal = self._ik(start + d * (PUSH_GAP_M - REAIM_GAP_M), self.yaw[w], back, self.push_offset)
            back[self.finger] = goal[self.finger] = self.closed
            rows = np.concatenate([_min_jerk(cur, back, self.vmax, self.fps, SLOW),
                                   _min_jerk(back, goal, self.vmax, self.fps, SLOW)])
            return self._plan(w, "lower", rows)
        if phase == "push":
            d, _, _, _ = self._push_line(pos)
            cur = self.rows[w][-1]
            back = self._point(cur, self.push_offset) - d * PUSH_BACK_M + [0, 0, RETREAT_M]
            goal = self._ik(back, self.yaw[w], cur, self.push_offset)
            goal[self.finger] = self.closed
            return self._plan(w, "retreat", _min_jerk(cur, goal, self.vmax, self.fps, SPEED))
        return self._plan(w, "hold", self.rows[w][-1])


def expert_for(env):
    """The scripted expert of ``env``'s task: :class:`ArmExpert` on a friction-grasp registry arm,
    else the seed's weld expert (:class:`tasks.expert.ScriptedExpert`)."""
    if getattr(env.task_scene, "grasp", "weld") == "friction":
        return ArmExpert(env)
    from tasks.expert import ScriptedExpert

    return ScriptedExpert(env)


__all__ = ["ArmExpert", "expert_for"]
