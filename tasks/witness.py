"""Witnesses: proof that a task's success verdict is reachable, computed through real kinematics.

A witness is a grasp pose, a carry pose and a path between them:

- ``q_grasp``: the centre of the jaw's bottom face (the downward face, at the start pose, of the
  box bounding the gripper body's collision geoms) on the centre of the scored prop's top face,
  gripper closed; solved by position IK (:func:`caliper_jax.ik.ik_position`) for a tool frame
  added at that face, from NSEED seeds, preferring the least tilted jaw;
- ``q_carry``: the prop, welded to the jaw at its relative pose at the grasp, has its centre where
  the success predicate holds -- inside the zone shrunk by ZONE_MARGIN (nearest its centre, kept
  above the ground) for ``placed_in_zone``, LIFT_MARGIN above the required height for
  ``lifted``, the intersection for ``all_of``, the first satisfiable term for ``any_of`` (the
  first whose carry has a collision-free path, when one has). Candidate targets on a grid over
  that region are solved in one batched IK call;
- ``path``: joint-space waypoints from grasp to carry along which neither the robot nor the
  welded prop penetrates anything: the straight line when clear, else an RRT-connect path.

Every IK answer is re-measured with MuJoCo's own kinematics and collision detection on the compiled
scene: a pose counts when the predicate holds at the prop position it really reaches, it is within
the joint limits, and nothing penetrates deeper than CONTACT_TOL (the jaw against the prop it holds
excepted). :func:`verify_witness` then runs the settled MuJoCo simulation that backs the claim.

Frames: world frame, metres; quaternions (w, x, y, z); ``q`` is the model's (nq,) coordinates.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError
from mjx_backend.scene import half_height  # noqa: F401  (tasks.check reads it from here)
from tasks.schema import AllOf, AnyOf, Lifted, PlacedInZone, Reached, Stacked

GRASP_TOL = 2e-3       # m: jaw bottom face centre to the prop's top face centre
CONTACT_TOL = 1e-3     # m: deepest penetration tolerated at a witness pose
LIFT_MARGIN = 0.02     # m above a lifted height (a welded prop sags a little under load)
ZONE_MARGIN = 0.01     # m inside each zone face (at most 30% of the half extent)
SEARCH = 0.25          # m: half width of the search window along an unbounded axis
GRID = 5               # candidate targets per axis
BATCH = 128            # IK lanes per call: a fixed size, so every call reuses one compiled solve
NSEED = 8              # grasp seeds per prop
PRESS_TOL = 2e-3       # m: deepest the jaw may press into the prop it grasps
SIDE_GAP = 1e-3        # m: a side grasp's jaw face to the prop's side
SIDE_DROP = 0.01       # m: a side grasp's jaw centre below the prop's top
SIDE_TOL = 5e-3        # m: how close IK must put the jaw face to a side grasp's aim
TOOL = "task_tool"     # the tool frame added to the model for IK

HOLD_S = 3.0           # s: at most, holding the carry pose until the state settles
SETTLE_SPEED = 1e-3    # m/s (props) and rad/s or m/s (joints): settled below this ...
SETTLE_FOR = 0.25      # s: ... for this long
CONTROL_DT = 0.01      # s between servo target updates
PATH_STEP = 0.02       # rad or m: collision checks along a joint-space path
EXTEND = 0.3           # rad or m: RRT-connect step (largest joint move) when the straight line collides
PLAN_ITERS = 400       # RRT-connect samples before giving up on a clear path
JOINT_SPEED = 1.0      # rad/s or m/s: the witness move's pace along each leg ...
MIN_LEG_S = 0.5        # s: ... and its shortest leg
PATH_TRIES = 3         # best carry poses whose paths are planned before giving up on clearance


@dataclass(frozen=True)
class Witness:
    """A grasp and a carry pose that satisfy ``term`` (a term of the task's predicate, or the
    predicate itself). ``relpose`` (7,): the carried prop's pose in the weld body's frame [pos,
    quat]; ``pos_grasp`` / ``pos_carry`` (P, 3): prop centres at each pose (the carried one
    predicted by FK, the others at their start); ``grasp_error`` (m): jaw face centre to top face
    centre; ``carry_offset`` (m): the carried centre to the preferred target (zone centre, ...);
    ``path`` (K, nq): joint-space waypoints q_grasp -> ... -> q_carry; ``path_clear``: whether the
    carried prop and the robot penetrate nothing along it (False: no clear path was found and
    ``path`` is the straight line, through whatever is in the way)."""

    prop: str
    term: object
    q_grasp: np.ndarray
    q_carry: np.ndarray
    relpose: np.ndarray
    pos_grasp: np.ndarray
    pos_carry: np.ndarray
    target: np.ndarray
    grasp_error: float
    carry_offset: float
    path: np.ndarray
    path_clear: bool


@dataclass(frozen=True)
class Verification:
    """A settled simulation of a witness. ``success``: the verdict on the settled state;
    ``at_start``: the verdict at t = 0 (props at their start); ``pos`` / ``vel`` (P, 3) prop
    centres and linear velocities at the end; ``settle_s``: time after the move until everything
    moved slower than SETTLE_SPEED for SETTLE_FOR (None: never within HOLD_S); ``drift`` (m): the
    carried prop's settled centre, still welded (before any release), to the witness's FK
    prediction (weld sag + servo error).
    Truthy when the settled verdict is true and the start verdict false."""

    success: bool
    at_start: bool
    pos: np.ndarray
    vel: np.ndarray
    settle_s: float | None
    drift: float

    def __bool__(self) -> bool:
        return bool(self.success and not self.at_start)


def term_label(pred) -> str:
    """Short text of a predicate term, e.g. ``placed_in_zone(cube, bin)``."""
    if isinstance(pred, Lifted):
        return f"lifted({pred.prop}, {pred.height:g} {pred.ref}{', held' if pred.held else ''})"
    if isinstance(pred, PlacedInZone):
        grasp = ", released" if pred.released else ", pushed" if pred.pushed else ""
        return f"placed_in_zone({pred.prop}, {pred.zone.name}{grasp})"
    if isinstance(pred, Stacked):
        return f"stacked({pred.prop} on {pred.on}{', released' if pred.released else ''})"
    if isinstance(pred, Reached):
        return f"reached({pred.prop}, {pred.tolerance:g}{f', above {pred.above:g}' if pred.above else ''})"
    if isinstance(pred, (AllOf, AnyOf)):
        kind = "all_of" if isinstance(pred, AllOf) else "any_of"
        return f"{kind}[{', '.join(term_label(t) for t in pred.terms)}]"
    return repr(pred)


# ---- geometry -------------------------------------------------------------------------------------

def _quat_mat(q) -> np.ndarray:
    from caliper_jax.io.rotations import quat_to_mat

    return np.asarray(quat_to_mat(np.asarray(q, np.float64)[None]))[0]


def top_face_center(prop) -> np.ndarray:
    """(3,) world centre of the prop's upward face: of a box the face whose normal points most
    upward, of a sphere the top point, of a cylinder the upper cap (or the top line when lying)."""
    R, p = _quat_mat(prop.quat), np.asarray(prop.pos, np.float64)
    if prop.kind == "sphere":
        return p + np.array([0.0, 0.0, prop.size[0]])
    if prop.kind == "box":
        k = int(np.argmax(np.abs(R[2])))
        return p + np.sign(R[2, k]) * prop.size[k] * R[:, k]
    r, h = prop.size
    axis = R[:, 2]
    if abs(axis[2]) >= np.sqrt(0.5):
        return p + np.sign(axis[2]) * h * axis
    up = np.array([0.0, 0.0, 1.0]) - axis[2] * axis
    return p + r * up / np.linalg.norm(up)


def jaw_face(ts) -> tuple[np.ndarray, np.ndarray]:
    """(centre (3,), outward normal (3,)) of the jaw's bottom face in the gripper body's frame: the
    face of the box bounding the body's collision geoms whose normal points most downward at the
    start pose."""
    import mujoco

    model = ts.model
    body = model.body_id(ts.gripper.joint)
    corners = []
    for g in model.geoms:
        if g.body != body or g.role != "collision" or g.kind == "mesh":
            continue
        half = np.asarray(g.size, np.float64)
        half = np.array([half[0]] * 3) if g.kind == "sphere" else \
            np.array([half[0], half[0], half[1] + (half[0] if g.kind == "capsule" else 0.0)]) \
            if g.kind in ("cylinder", "capsule") else half
        signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * 3)).reshape(3, -1).T
        corners.append(np.asarray(g.p, np.float64) + (signs * half) @ np.asarray(g.R, np.float64).T)
    if not corners:
        raise CaliperError(f"task {ts.name}: gripper {ts.gripper.joint!r} has no primitive collision "
                           "geometry: no jaw face to grasp with")
    pts = np.concatenate(corners)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    d = mujoco.MjData(ts.scene.mj)
    d.qpos[:] = ts.qpos(ts.q0)
    mujoco.mj_kinematics(ts.scene.mj, d)
    down = np.asarray(d.xmat[ts.weld_body]).reshape(3, 3).T @ np.array([0.0, 0.0, -1.0])
    k = int(np.argmax(np.abs(down)))
    face, normal = 0.5 * (lo + hi), np.zeros(3)
    face[k] = hi[k] if down[k] > 0 else lo[k]
    normal[k] = 1.0 if down[k] > 0 else -1.0
    return face, normal


class _Kin:
    """MuJoCo kinematics and contacts of the task scene at given robot and prop poses."""

    def __init__(self, ts):
        import mujoco

        self.ts, self.mj, self.d = ts, ts.scene.mj, mujoco.MjData(ts.scene.mj)
        self.L = L = ts.scene.layout
        self.body = ts.weld_body
        self.jaw_geoms = np.array([int(self.mj.geom_bodyid[g]) == self.body for g in range(self.mj.ngeom)])
        self.robot_geoms = np.isin(np.arange(self.mj.ngeom), list(L.robot_geoms))
        self.direct = not (L.free or len(L.mimic_qfull))     # q maps onto qpos by index alone
        self.mujoco = mujoco

    def set(self, q, carried: str | None = None, relpose=None) -> None:
        """Robot at q, props at their start, ``carried`` welded to the jaw at ``relpose`` (7,);
        runs MuJoCo's kinematics and collision detection."""
        mujoco, L = self.mujoco, self.L
        if self.direct:
            self.d.qpos[:] = L.qpos0
            self.d.qpos[L.q_to_qpos] = q
        else:
            self.d.qpos[:] = self.ts.qpos(q)
        mujoco.mj_kinematics(self.mj, self.d)
        if carried is not None:
            R, p = self.jaw()
            a = L.prop_qposadr[carried]
            self.d.qpos[a:a + 3] = p + R @ relpose[:3]
            mujoco.mju_mulQuat(self.d.qpos[a + 3:a + 7], self.d.xquat[self.body], relpose[3:])
            mujoco.mj_kinematics(self.mj, self.d)
        mujoco.mj_collision(self.mj, self.d)

    def jaw(self) -> tuple[np.ndarray, np.ndarray]:
        return self.d.xmat[self.body].reshape(3, 3).copy(), self.d.xpos[self.body].copy()

    def name(self, g: int) -> str:
        return self.mujoco.mj_id2name(self.mj, self.mujoco.mjtObj.mjOBJ_GEOM, int(g)) or f"geom{g}"

    def prop_positions(self) -> np.ndarray:
        return np.array([self.d.xpos[self.L.prop_body[n]] for n in self.ts.prop_names]).reshape(-1, 3)

    def overlaps(self, held: str | None = None, carried: bool = True, depth: float = CONTACT_TOL) -> list:
        """[(geom1, geom2, depth)] of contacts deeper than ``depth`` that involve the robot (or
        ``held`` when ``carried``), the jaw against ``held`` excepted. Contacts among props at
        rest and the ground are the start state's business (:mod:`tasks.check`), not counted."""
        n = self.d.ncon
        if n == 0:
            return []
        dist, geom = self.d.contact.dist[:n], self.d.contact.geom[:n]
        g1, g2 = geom[:, 0], geom[:, 1]
        hg = self.L.prop_geom.get(held, -1)
        jaw, robot = self.jaw_geoms, self.robot_geoms
        moving = robot[g1] | robot[g2]
        if carried:
            moving |= (g1 == hg) | (g2 == hg)
        grip = ((g1 == hg) & jaw[g2]) | ((g2 == hg) & jaw[g1])
        keep = (-dist > depth) & moving & ~grip
        hits = zip(g1[keep], g2[keep], dist[keep], strict=True)
        return [(self.name(a), self.name(b), float(-d)) for a, b, d in hits]


# ---- IK -------------------------------------------------------------------------------------------

def _tool_model(ts, point):
    """The model with a frame TOOL at ``point`` (3,) in the gripper body's frame."""
    import jax.numpy as jnp

    m = ts.model
    dtype = m.dtype
    body = m.body_id(ts.gripper.joint)
    return m.replace(frame_names=m.frame_names + (TOOL,), frame_body=m.frame_body + (body,),
                     frame_kind=m.frame_kind + ("link",),
                     frame_R=jnp.concatenate([m.frame_R, jnp.eye(3, dtype=dtype)[None]]),
                     frame_p=jnp.concatenate([m.frame_p, jnp.asarray(point, dtype)[None]]))


def _solve(ts, point, targets, seeds) -> np.ndarray:
    """(N, nq) IK answers putting ``point`` (gripper body frame) at ``targets`` (N, 3), first from
    ``seeds`` (N, nq) then from the solver's restarts; padded to BATCH lanes per call. The gripper
    joint is left free (on gripper_arm it slides the jaw sideways, and a locked closed jaw leaves
    an unreachable 0.8 mm that keeps the solver from converging); callers close it afterwards and
    re-measure in MuJoCo."""
    from caliper_jax.ik import ik_position

    model = _tool_model(ts, point)
    n = len(targets)
    out = []
    for i in range(0, n, BATCH):
        t, s = targets[i:i + BATCH], seeds[i:i + BATCH]
        pad = BATCH - len(t)
        t = np.concatenate([t, np.repeat(t[:1], pad, axis=0)])
        s = np.concatenate([s, np.repeat(s[:1], pad, axis=0)])
        res = ik_position(model, t, frame=TOOL, seed_q=s)
        out.append(np.asarray(res.q, np.float64)[:BATCH - pad])
    return np.concatenate(out) if out else np.zeros((0, ts.model.nq))


def _within_limits(ts, q) -> bool:
    lo, hi = np.asarray(ts.model.qpos_lower, np.float64), np.asarray(ts.model.qpos_upper, np.float64)
    return bool(np.all(q >= lo - 1e-6) and np.all(q <= hi + 1e-6))


def _closed(ts, q) -> np.ndarray:
    q = np.array(q, dtype=np.float64)
    q[ts.gripper.q_index] = ts.gripper.closed
    return q


@dataclass(frozen=True)
class Grasp:
    prop: str
    q: np.ndarray | None     # (nq,) None when the jaw cannot reach the top face
    error: float             # m, jaw face centre to top face centre (best found)
    why: str = ""


def lateral_tolerance(prop) -> float:
    """m: how far off the top face's centre, horizontally, the jaw face may land (half the face's
    smaller half extent; an arm that cannot reach the centre -- a planar arm and a prop off its
    plane -- still lands well inside the face)."""
    half = prop.size[:2] if prop.kind == "box" else (prop.size[0],) * 2
    return max(GRASP_TOL, 0.5 * float(min(half)))


def grasps(ts, props=None) -> dict:
    """{prop: Grasp} for ``props`` (default all): the jaw's bottom face on the top face, found by
    IK from NSEED seeds (the start pose, then uniform draws within the limits); the best answer
    reaches the face's height within GRASP_TOL and lands within :func:`lateral_tolerance` of its
    centre, stays in the limits, and the robot penetrates nothing (the grasped
    prop under the jaw excepted) deeper than CONTACT_TOL; the least tilted jaw that presses into the
    prop no deeper than PRESS_TOL wins. When every top grasp presses deeper (a tilted jaw's corner
    digs in and shoves the prop), a clean side grasp (:func:`_side_grasp`) is preferred, and the
    least tilted pressing top grasp is the last resort."""
    names = list(ts.prop_names if props is None else props)
    if not names:
        return {}
    face, normal = jaw_face(ts)
    by_name = {p.name: p for p in ts.task.props}
    lo, hi = np.asarray(ts.model.qpos_lower, np.float64), np.asarray(ts.model.qpos_upper, np.float64)
    rng = np.random.default_rng(0)
    seeds = [_closed(ts, ts.q0)] + [_closed(ts, rng.uniform(lo, hi)) for _ in range(NSEED - 1)]
    targets = np.repeat([top_face_center(by_name[n]) for n in names], NSEED, axis=0)
    qs = _solve(ts, face, targets, np.array(seeds * len(names)))
    kin = _Kin(ts)
    out = {}
    for k, name in enumerate(names):
        best, best_key, best_err, why = None, None, np.inf, "the jaw cannot reach it"
        lateral_tol = lateral_tolerance(by_name[name])
        for q in qs[k * NSEED:(k + 1) * NSEED]:
            q = _closed(ts, q)
            kin.set(q)
            R, p = kin.jaw()
            miss = p + R @ face - targets[k * NSEED]
            err = float(np.linalg.norm(miss))
            best_err = min(best_err, err)
            off_face = abs(miss[2]) > GRASP_TOL or np.linalg.norm(miss[:2]) > lateral_tol
            if off_face or not _within_limits(ts, q):
                continue
            hits = kin.overlaps(held=name, carried=False)
            if hits:
                why = f"the jaw reaches it only with {hits[0][0]} in {hits[0][1]} ({hits[0][2] * 1e3:.1f} mm)"
                continue
            key = (_pressed(kin, name) > PRESS_TOL, float(R[2] @ normal), float(np.linalg.norm(q - ts.q0)))
            if best_key is None or key < best_key:
                best, best_key = q, key
        if best_key is not None and best_key[0]:          # only top grasps that press into the prop
            side = _side_grasp(ts, kin, by_name[name], seeds)
            if side is not None:
                best, best_err = side
        out[name] = Grasp(name, best, best_err, "" if best is not None else why)
    return out


def _pressed(kin, prop: str) -> float:
    """m: how deep the jaw presses into ``prop`` (0 when it does not)."""
    jaw = {kin.name(g) for g in np.flatnonzero(kin.jaw_geoms)}
    return max((d for a, b, d in kin.overlaps(depth=0.0) if prop in (a, b) and {a, b} & jaw), default=0.0)


def _takes(ts, kin, prop) -> bool:
    """Whether a closing gripper at the current pose takes ``prop`` (the environment's rule,
    :func:`tasks.env_spec.grasp_candidates`)."""
    from types import SimpleNamespace

    from tasks import env_spec

    center, half = env_spec.jaw_box(ts)
    rule = SimpleNamespace(jaw_center=center, jaw_half=half, prop_reach=np.array([env_spec.prop_reach(prop)]),
                           grasp_margin=env_spec.GRASP_MARGIN)
    R, p = kin.jaw()
    pos = kin.prop_positions()[list(ts.prop_names).index(prop.name)]
    return bool(env_spec.grasp_candidates(rule, np, p, R, pos[None])[0])


def _side_grasp(ts, kin, prop, seeds) -> tuple[np.ndarray, float] | None:
    """A side grasp of a box-like ``prop`` for when no top grasp is clean: a side face of the jaw's
    box (at the start pose: +-x, +-y) against the prop's facing side, SIDE_GAP away, the jaw's
    centre SIDE_DROP below the prop's top; valid when IK lands within SIDE_TOL along the face's
    normal and vertically (within :func:`lateral_tolerance` across it), the pose is within
    the limits, nothing penetrates (the jaw against this prop included, up to PRESS_TOL) and the
    environment's grasp rule takes the prop. The least tilted jaw wins -> (q, miss in m) or None."""
    from tasks import env_spec

    center, half = env_spec.jaw_box(ts)
    kin.set(ts.q0)
    R0, _ = kin.jaw()
    top = top_face_center(prop)[2]
    Rp = _quat_mat(prop.quat)
    size = np.asarray(prop.size if prop.kind == "box" else (prop.size[0],) * 3, np.float64)
    faces, targets, normals = [], [], []
    for axis in (0, 1):
        for sign in (1.0, -1.0):
            n = sign * R0[:, axis]                        # the jaw face's outward normal, world
            reach = float(np.abs(Rp.T @ n) @ size)        # the prop's extent along n
            point = np.asarray(prop.pos, np.float64) - n * (reach + half[axis] + SIDE_GAP)
            point[2] = top - SIDE_DROP
            faces.append(center + sign * half[axis] * np.eye(3)[axis])
            targets.append(point + R0 @ (faces[-1] - center))      # the face centre, not the jaw centre
            normals.append(n)
    best, best_key = None, None
    lateral_tol = lateral_tolerance(prop)
    for face, target, n in zip(faces, targets, normals, strict=True):
        across = np.cross(n, [0.0, 0.0, 1.0])
        qs = _solve(ts, face, np.repeat(target[None], NSEED, axis=0), np.array(seeds))
        for q in qs:
            q = _closed(ts, q)
            kin.set(q)
            R, p = kin.jaw()
            miss = p + R @ face - target
            off = abs(miss @ n) > SIDE_TOL or abs(miss[2]) > SIDE_TOL or abs(miss @ across) > lateral_tol
            if off or not _within_limits(ts, q):
                continue
            if kin.overlaps(held=prop.name, carried=False) or _pressed(kin, prop.name) > PRESS_TOL:
                continue
            if not _takes(ts, kin, prop):
                continue
            key = (-float(R[2, 2]), float(np.linalg.norm(q - ts.q0)))
            if best_key is None or key < best_key:
                best, best_key = (q, float(np.linalg.norm(miss))), key
    return best


# ---- goals ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Goal:
    """Where prop centres must be for ``term``: {prop: (lo (3,), hi (3,))} boxes already shrunk by
    the margins, and the preferred point of the first constrained prop."""

    term: object
    boxes: dict
    preferred: dict


def _leaf_goal(ts, pred) -> Goal:
    names = ts.prop_names
    if pred.prop not in names:
        raise CaliperError(f"task {ts.name}: {term_label(pred)}: no prop named {pred.prop!r}")
    p0 = ts.pos0[names.index(pred.prop)]
    if isinstance(pred, Lifted):
        z = pred.height + (p0[2] if pred.ref == "initial" else 0.0) + LIFT_MARGIN
        lo, hi = np.array([-np.inf, -np.inf, z]), np.full(3, np.inf)
        return Goal(pred, {pred.prop: (lo, hi)}, {pred.prop: np.array([p0[0], p0[1], z])})
    c, h = np.asarray(pred.zone.center, np.float64), np.asarray(pred.zone.half, np.float64)
    m = np.minimum(ZONE_MARGIN, 0.3 * h)
    return Goal(pred, {pred.prop: (c - h + m, c + h - m)}, {pred.prop: c})


def goals(ts, pred) -> list:
    """Alternative goals of a predicate, in order (any_of: one per term; all_of: boxes of one
    prop intersected)."""
    if isinstance(pred, PlacedInZone) and pred.pushed:
        raise CaliperError(f"task {ts.name}: {term_label(pred)}: the weld witness carries the prop to its "
                           "goal, which a pushed term forbids (a friction-grasp push task's witness is its "
                           "push expert)")
    if isinstance(pred, (Lifted, PlacedInZone)):
        return [_leaf_goal(ts, pred)]
    if isinstance(pred, AnyOf):
        return [g for t in pred.terms for g in goals(ts, t)]
    if isinstance(pred, AllOf):
        combos = [Goal(pred, {}, {})]
        for term in pred.terms:
            combos = [_merge(pred, a, b) for a in combos for b in goals(ts, term)]
        return combos
    if isinstance(pred, Stacked):
        raise CaliperError(f"task {ts.name}: {term_label(pred)}: the weld witness carries one prop to a "
                           "fixed goal and cannot build a stack (a friction-grasp task's witness is its "
                           "expert)")
    raise CaliperError(f"task {ts.name}: unknown predicate {pred!r}")


def _merge(term, a: Goal, b: Goal) -> Goal:
    boxes = dict(a.boxes)
    for prop, (lo, hi) in b.boxes.items():
        if prop in boxes:
            lo, hi = np.maximum(boxes[prop][0], lo), np.minimum(boxes[prop][1], hi)
        boxes[prop] = (lo, hi)
    preferred = dict(b.preferred)
    preferred.update(a.preferred)
    return Goal(term, boxes, preferred)


def _carried(ts, goal: Goal) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """(prop, lo, hi, preferred) of the one prop the goal needs moved, the box floor raised to
    keep the prop above the ground. Raises when the goal is empty or needs two props moved."""
    names, pos0 = ts.prop_names, ts.pos0
    for prop, (lo, hi) in goal.boxes.items():
        if np.any(lo > hi):
            raise CaliperError(f"prop {prop!r}: the terms contradict each other (no position satisfies all)")
    moved = [p for p, (lo, hi) in goal.boxes.items()
             if not np.all((pos0[names.index(p)] >= lo) & (pos0[names.index(p)] <= hi))]
    if len(moved) > 1:
        raise CaliperError(f"props {', '.join(moved)} would all have to move, and the gripper carries one "
                           "prop at a time")
    prop = moved[0] if moved else next(iter(goal.boxes))
    lo, hi = (x.copy() for x in goal.boxes[prop])
    if ts.task.ground is not None:
        by_name = {p.name: p for p in ts.task.props}
        lo[2] = max(lo[2], ts.task.ground + half_height(by_name[prop]) + CONTACT_TOL)
        if lo[2] > hi[2]:
            raise CaliperError(f"prop {prop!r}: the goal lies below the ground (its centre must stay "
                               f"{half_height(by_name[prop]):.3g} m above it)")
    pref = np.clip(goal.preferred.get(prop, pos0[names.index(prop)]), lo, hi)
    return prop, lo, hi, pref


def _candidates(lo, hi, preferred) -> np.ndarray:
    """(N, 3) targets: the preferred point, then a GRID^3 grid over the box (unbounded sides cut at
    SEARCH, 2 * SEARCH above a floor), nearest the preferred point first; at most BATCH."""
    lo = np.where(np.isfinite(lo), lo, preferred - SEARCH)
    hi = np.where(np.isfinite(hi), hi, lo + 2 * SEARCH)
    axes = [np.linspace(a, b, GRID) if b > a else np.array([a]) for a, b in zip(lo, hi, strict=True)]
    grid = np.array(np.meshgrid(*axes, indexing="ij")).reshape(3, -1).T
    grid = grid[np.argsort(np.linalg.norm(grid - preferred, axis=1), kind="stable")]
    return np.concatenate([preferred[None], grid])[:BATCH]


# ---- the witness ----------------------------------------------------------------------------------

def witness(ts) -> Witness:
    """A grasp and carry pose satisfying ``ts.task.success`` (see the module docstring). Raises a
    CaliperError naming the task and the predicate term when no reachable pose exists."""
    from tasks.predicates import evaluate_np

    task = ts.task
    if task.success is None:
        raise CaliperError(f"task {task.name}: no success predicate to witness")
    reasons, fallback = [], None
    for goal in goals(ts, task.success):
        try:
            w = _witness_goal(ts, goal, evaluate_np)
        except CaliperError as exc:
            reasons.append(f"{term_label(goal.term)}: {exc}")
            continue
        if w.path_clear:
            return w
        fallback = fallback or w
    if fallback is not None:
        return fallback
    raise CaliperError(f"task {task.name}: success {term_label(task.success)} has no reachable witness -- "
                       + "; ".join(reasons))


def _witness_goal(ts, goal: Goal, evaluate_np) -> Witness:
    from tasks.predicates import geometric

    prop, lo, hi, pref = _carried(ts, goal)
    g = grasps(ts, [prop])[prop]
    if g.q is None:
        raise CaliperError(f"prop {prop!r}: {g.why} (the jaw's face misses the top face centre by at best "
                           f"{g.error * 1e3:.1f} mm)")
    kin = _Kin(ts)
    kin.set(g.q)
    from mjx_backend.grasp import relative_pose

    rel = relative_pose(kin.d, ts.weld_body, ts.scene.layout.prop_body[prop])
    targets = _candidates(lo, hi, pref)
    qs = _solve(ts, rel[:3], targets, np.repeat(g.q[None], len(targets), axis=0))
    names, pos0, zero = ts.prop_names, ts.pos0, np.zeros((len(ts.prop_names), 3))
    i = names.index(prop)
    pose_only = geometric(ts.task.success)             # the grasp is decided by verify_witness
    valid, closest, why = [], np.inf, "no candidate reaches the goal region"
    for target, q in zip(targets, qs, strict=True):
        q = _closed(ts, q)
        if not _within_limits(ts, q):
            continue
        kin.set(q, prop, rel)
        pos = kin.prop_positions()
        inside = bool(np.all(pos[i] >= lo - 1e-9) and np.all(pos[i] <= hi + 1e-9))
        closest = min(closest, float(np.linalg.norm(np.clip(pos[i], lo, hi) - pos[i])))
        if not (inside and evaluate_np(pose_only, names, pos, pos0, zero)):
            continue
        hits = kin.overlaps(held=prop)
        if hits:
            why = f"every pose reaching it has {hits[0][0]} in {hits[0][1]} ({hits[0][2] * 1e3:.1f} mm)"
            continue
        valid.append(((float(np.linalg.norm(pos[i] - pref)), float(np.linalg.norm(q - g.q))), q, pos, target))
    if not valid:
        if np.isfinite(closest) and closest > 0:
            why += f" (closest reachable centre {closest * 1e3:.1f} mm outside it)"
        raise CaliperError(f"prop {prop!r}: {why}")
    valid.sort(key=lambda v: v[0])
    first = None
    for key, q, pos, target in valid[:PATH_TRIES]:
        path = plan_path(kin, prop, rel, g.q, q)
        w = Witness(prop, goal.term, g.q, q, rel, pos0.copy(), pos, target, g.error, key[0],
                    np.stack([g.q, q]) if path is None else path, path is not None)
        if path is not None:
            return w
        first = first or w
    return first


def segment_clear(kin, qa, qb, prop=None, rel=None, carried: bool = True) -> bool:
    """Whether the straight joint-space segment qa -> qb is free of penetrations deeper than
    CONTACT_TOL (checked every PATH_STEP): with ``prop`` welded at ``rel`` when ``carried``, else
    with ``prop`` at rest and only its contact with the jaw excepted (an approach to grasp it)."""
    n = int(np.ceil(np.max(np.abs(qb - qa)) / PATH_STEP)) + 1
    for s in np.linspace(0.0, 1.0, n):
        kin.set(qa + s * (qb - qa), prop if carried else None, rel)
        if kin.overlaps(held=prop, carried=carried):
            return False
    return True


def plan_path(kin, prop, rel, q_from, q_to) -> np.ndarray | None:
    """(K, nq) joint-space waypoints from ``q_from`` to ``q_to`` along which ``prop``, welded at
    ``rel``, and the robot penetrate nothing deeper than CONTACT_TOL (checked every PATH_STEP):
    the straight line when it is clear, else an RRT-connect path (PLAN_ITERS samples, seeded,
    gripper held closed) shortened greedily; None when none is found."""
    clear = lambda a, b: segment_clear(kin, a, b, prop, rel)
    return connect(kin.ts, clear, q_from, q_to, kin.ts.gripper.closed)


def connect(ts, clear, q_from, q_to, gripper: float) -> np.ndarray | None:
    """The straight line from ``q_from`` to ``q_to`` when ``clear(a, b)`` says so, else an
    RRT-connect path shortened greedily, or None when none is found. The search is the planners'
    one RRT-Connect (:func:`caliper_jax.planning.vrrt.host_search`: steps of EXTEND, edges
    checked every PATH_STEP, 4 x PLAN_ITERS single motions, key 1, the gripper coordinate held at
    ``gripper``) with a state valid when ``clear(q, q)``."""
    if clear(q_from, q_to):
        return np.stack([q_from, q_to])
    import jax

    from caliper_jax.planning.vrrt import SearchOptions, host_search

    lo, hi = np.asarray(ts.model.qpos_lower, np.float64), np.asarray(ts.model.qpos_upper, np.float64)
    lo, hi = np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)
    lo[ts.gripper.q_index] = hi[ts.gripper.q_index] = gripper

    def valid(qs):
        return np.array([clear(q, q) for q in qs], dtype=bool)

    opts = SearchOptions(step=EXTEND, resolution=PATH_STEP, capacity=1024, max_iterations=4 * PLAN_ITERS,
                         path_capacity=1024, candidates=1)
    r = host_search(valid, np.asarray(q_from, np.float64), np.asarray(q_to, np.float64),
                    jax.random.PRNGKey(1), lo, hi, opts)
    return None if r["path"] is None else _shorten(list(r["path"]), clear)


def _shorten(path: list, clear) -> np.ndarray:
    """Greedy shortcut: from each kept waypoint jump to the farthest one reachable in a straight
    clear line."""
    out, i = [path[0]], 0
    while i < len(path) - 1:
        j = next(j for j in range(len(path) - 1, i, -1) if j == i + 1 or clear(path[i], path[j]))
        out.append(path[j])
        i = j
    return np.stack(out)


# ---- verification ---------------------------------------------------------------------------------

def verify_witness(ts, w: Witness, *, speed: float = JOINT_SPEED, hold_s: float = HOLD_S) -> Verification:
    """Simulate the witness in MuJoCo (CPU, one world): start at ``q_grasp`` with every prop at its
    start pose, weld the carried prop at its relative pose of that instant, drive the position
    servos to ``q_carry`` along ``w.path`` (straight joint-space lines with smoothstep timing, each
    leg taking max(MIN_LEG_S, largest joint change / ``speed``)),
    then hold, gripper closed, until every prop and joint has moved slower than SETTLE_SPEED for
    SETTLE_FOR (at most ``hold_s``). When the predicate wants the carried prop released, the weld
    is then switched off, the gripper opens at the carry pose and the scene settles again. The
    predicate is judged on that state, with the carried prop held (or released), and carried as
    the environments judge it (:func:`tasks.predicates.carry_update`: welded CARRY_S, risen
    CARRY_RISE while welded)."""
    from mjx_backend.cpu import MujocoBackend
    from mjx_backend.grasp import relative_pose
    from tasks.predicates import carry_start, carry_ticks, carry_update, evaluate_np, released_props

    if ts.scene.mjcf.actuators != "position":
        raise CaliperError(f"task {ts.name}: verify_witness drives position servos; build the scene "
                           f"with actuators='position' (got {ts.scene.mjcf.actuators!r})")
    names, pos0, pred = ts.prop_names, ts.pos0, ts.task.success
    L = ts.scene.layout
    dofs = np.array([L.prop_dofadr[n] for n in names], dtype=np.int64).reshape(-1)
    with MujocoBackend(ts.scene, q0=w.q_grasp) as b:                # starts reset at q_grasp
        def props():
            qpos, qvel = b.qpos()[0], b.world_data().qvel
            pos = np.array([qpos[L.prop_qposadr[n]:L.prop_qposadr[n] + 3] for n in names]).reshape(-1, 3)
            return pos, np.array([qvel[a:a + 3] for a in dofs]).reshape(-1, 3)

        nobody = np.zeros(len(names), bool)
        in_hand = np.array([n == w.prop for n in names], bool)
        release = w.prop in released_props(pred)
        pos, vel = props()
        at_start = bool(evaluate_np(pred, names, pos, pos0, vel, nobody, nobody))
        rel = relative_pose(b.world_data(), ts.weld_body, L.prop_body[w.prop])
        b.set_weld(0, w.prop, True, rel)
        b.enable()
        carry, carried = carry_start(np, nobody.shape), nobody   # picked up (tasks.predicates.carry_update)
        need = carry_ticks(1.0 / CONTROL_DT)
        for qa, qb in zip(w.path[:-1], w.path[1:], strict=True):
            n_move = max(1, int(round(max(MIN_LEG_S, np.max(np.abs(qb - qa)) / speed) / CONTROL_DT)))
            for k in range(1, n_move + 1):
                s = k / n_move
                b.command(qa + s * s * (3.0 - 2.0 * s) * (qb - qa))
                b.step(CONTROL_DT)
                carry, carried = carry_update(np, carry, in_hand, props()[0], pos0, need)

        def settle():
            nonlocal carry, carried
            calm, t = 0.0, 0.0
            while t < hold_s - 1e-9:
                state = b.step(CONTROL_DT)
                t += CONTROL_DT
                now, vel = props()
                if b.weld_active(0)[w.prop]:
                    carry, carried = carry_update(np, carry, in_hand, now, pos0, need)
                speed = max(float(np.max(np.abs(state.v))),
                            float(np.max(np.linalg.norm(vel, axis=1), initial=0.0)))
                calm = calm + CONTROL_DT if speed < SETTLE_SPEED else 0.0
                if calm >= SETTLE_FOR - 1e-9:
                    return t
            return None

        settle_s = settle()
        for _ in range(need):                            # a release comes after CARRY_S in the gripper
            if not release or carry[2][names.index(w.prop)]:
                break
            b.step(CONTROL_DT)
            carry, carried = carry_update(np, carry, in_hand, props()[0], pos0, need)
        carried_at = props()[0][names.index(w.prop)]    # the carry's end, before any release
        if release:
            b.set_weld(0, w.prop, False)
            q_open = np.array(w.path[-1], np.float64)
            q_open[ts.gripper.q_index] = ts.gripper.open
            b.command(q_open)
            again = settle()
            settle_s = None if settle_s is None or again is None else settle_s + again
        pos, vel = props()
    held = nobody if release else in_hand
    success = bool(evaluate_np(pred, names, pos, pos0, vel, held, carried))
    drift = float(np.linalg.norm(carried_at - w.pos_carry[names.index(w.prop)]))
    return Verification(success, at_start, pos, vel, settle_s, drift)


# ---- reaching (a ``reached`` success) ---------------------------------------------------------------

def grip_of(ts, d) -> np.ndarray:
    """(3,) world gripper point (:func:`tasks.rewards.grip_point`: the jaw box centre) in MuJoCo
    data ``d`` of the task scene."""
    from tasks.env_spec import jaw_body, jaw_box

    body = jaw_body(ts)
    centre, _ = jaw_box(ts)
    return np.asarray(d.xpos[body]) + np.asarray(d.xmat[body]).reshape(3, 3) @ centre


@dataclass(frozen=True)
class ReachWitness:
    """A settled simulation of the pose that puts the gripper point on a ``reached`` goal. ``q``
    (nq,): the IK pose (None: none within the joint limits); ``goal`` (3,): the goal point at the
    start; ``ik_error`` (m): FK of ``q`` to the goal; ``error`` (m): the settled gripper point to the
    goal; ``success``: the task's verdict held for its dwell after the move."""

    q: np.ndarray | None
    goal: np.ndarray
    ik_error: float
    error: float
    success: bool


def reach_witness(ts, *, speed: float = JOINT_SPEED) -> ReachWitness:
    """IK for a ``reached`` success (the gripper point onto the goal over the prop's start centre,
    seeded at q0), then a MuJoCo simulation from q0: a smoothstep move at ``speed`` and HOLD_S of
    holding, judged every CONTROL_DT with the task's dwell."""
    from mjx_backend.cpu import MujocoBackend
    from tasks.env_spec import jaw_box
    from tasks.predicates import dwell_ticks, evaluate_np

    pred, names = ts.task.success, ts.prop_names
    if not isinstance(pred, Reached):
        raise CaliperError(f"task {ts.name}: reach_witness needs a reached success, got {term_label(pred)}")
    goal = np.asarray(ts.pos0[names.index(pred.prop)], np.float64) + np.array([0.0, 0.0, pred.above])
    centre, _ = jaw_box(ts)
    q = _solve(ts, centre, goal[None], np.asarray(ts.q0, np.float64)[None])[0]
    kin = _Kin(ts)
    kin.set(q)
    ik_error = float(np.linalg.norm(grip_of(ts, kin.d) - goal))
    if not _within_limits(ts, q) or ik_error > pred.tolerance:
        return ReachWitness(None, goal, ik_error, np.inf, False)
    L, nobody = ts.scene.layout, np.zeros(len(names), bool)
    qadr = [L.prop_qposadr[n] for n in names]
    need, run, ok = dwell_ticks(ts.task, round(1.0 / CONTROL_DT)), 0, False
    q0 = np.asarray(ts.q0, np.float64)
    n_move = max(1, int(round(max(MIN_LEG_S, float(np.max(np.abs(q - q0))) / speed) / CONTROL_DT)))
    with MujocoBackend(ts.scene, q0=q0) as b:
        b.enable()
        for k in range(1, n_move + int(round(HOLD_S / CONTROL_DT)) + 1):
            s = min(k / n_move, 1.0)
            b.command(q0 + s * s * (3.0 - 2.0 * s) * (q - q0))
            b.step(CONTROL_DT)
            d = b.world_data()
            pos = np.array([d.qpos[a:a + 3] for a in qadr]).reshape(-1, 3)
            grip = grip_of(ts, d)
            now = bool(evaluate_np(pred, names, pos, ts.pos0, None, nobody, nobody, grip))
            run = run + 1 if now else 0
            ok = ok or run >= need
        i = names.index(pred.prop)
        error = float(np.linalg.norm(grip - pos[i] - (goal - ts.pos0[i])))
    return ReachWitness(q, goal, ik_error, error, ok)


__all__ = ["GRASP_TOL", "CONTACT_TOL", "LIFT_MARGIN", "ZONE_MARGIN", "Goal", "Grasp", "ReachWitness",
           "Verification", "Witness", "goals", "grasps", "grip_of", "jaw_face", "reach_witness",
           "top_face_center", "verify_witness", "witness"]
