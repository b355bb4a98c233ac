"""What the two VecEnv engines share, written once: the observation layout, the gripper and grasp
rule, and the per-world randomisation draws.

Array functions take the array module ``xp`` (``numpy`` on the CPU engine, ``jax.numpy`` inside
the MJX engine's jitted step) and broadcast over any leading world axes, so both engines compute
the same thing from the same formulas. Frames: world frame, metres, quaternions (w, x, y, z).

Grasping is the weld heuristic of :mod:`mjx_backend.grasp`, made geometric so that both engines
decide identically and without a per-world contact query: while the gripper is commanded closed
and nothing is held, the first prop (task order) whose centre lies inside the jaw's collision box
grown by the prop's smallest half size plus ``GRASP_MARGIN`` (in the jaw frame) is welded to the
jaw at its current relative pose; commanding the gripper open releases it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

#: Slack (m) added around the jaw box when deciding which prop a closing gripper takes.
GRASP_MARGIN = 0.01
#: A gripper target counts as "close" beyond this fraction of its range past the midpoint.
CLOSE_BAND = 0.1


@dataclass(frozen=True)
class EnvLayout:
    """Static description of one task's environment (host-side numbers only)."""

    nq: int
    nv: int
    prop_names: tuple                  # (P,)
    pair_props: tuple                  # (K,) prop index of each (prop, zone) pair of the predicate
    pair_centers: np.ndarray           # (K, 3) zone centre of each pair
    gripper_q: int                     # q index of the gripper joint
    gripper_open: float                # target that opens it
    gripper_closed: float              # target that closes it
    jaw_center: np.ndarray             # (3,) centre of the jaw's collision box, jaw-body frame
    jaw_half: np.ndarray               # (3,) its half extents
    prop_reach: np.ndarray             # (P,) smallest half size of each prop
    fps: int
    substeps: int                      # physics steps per control tick
    horizon: int                       # control ticks per episode
    grasp_margin: float = GRASP_MARGIN
    friction: bool = False             # friction grasp: a held prop must stay in the jaw's reach

    @property
    def nprop(self) -> int:
        return len(self.prop_names)

    @property
    def obs_dim(self) -> int:
        """q, v, gripper opening, held flag, per prop (pos, quat, linvel, pos - jaw), per pair
        (zone centre - prop pos)."""
        return self.nq + self.nv + 2 + 13 * self.nprop + 3 * len(self.pair_props)


def observation(L: EnvLayout, xp, q, v, held, prop_pos, prop_quat, prop_vel, jaw_pos):
    """(..., obs_dim) float observation. q (..., nq), v (..., nv), held (...,) int (-1: none),
    prop_pos / prop_vel (..., P, 3), prop_quat (..., P, 4), jaw_pos (..., 3)."""
    lead = q.shape[:-1]
    span = L.gripper_open - L.gripper_closed
    opening = (q[..., L.gripper_q] - L.gripper_closed) / span
    rel_jaw = prop_pos - jaw_pos[..., None, :]
    parts = [q, v, opening[..., None], (held >= 0).astype(q.dtype)[..., None],
             xp.concatenate([prop_pos, prop_quat, prop_vel, rel_jaw], axis=-1).reshape(lead + (-1,))]
    if L.pair_props:
        idx = np.asarray(L.pair_props)
        centers = xp.asarray(L.pair_centers, dtype=q.dtype)
        parts.append((centers - prop_pos[..., idx, :]).reshape(lead + (-1,)))
    return xp.concatenate([xp.asarray(p, dtype=q.dtype) for p in parts], axis=-1)


def observation_parts(L: EnvLayout, obs) -> dict:
    """The named parts of observations ``obs`` (..., obs_dim): q, v, opening, held, prop_pos,
    prop_quat, prop_vel, prop_minus_jaw (..., P, 3|4), zone_minus_prop (..., K, 3)."""
    lead, P, K = obs.shape[:-1], L.nprop, len(L.pair_props)
    i = L.nq + L.nv
    props = obs[..., i + 2:i + 2 + 13 * P].reshape(lead + (P, 13))
    return {"q": obs[..., :L.nq], "v": obs[..., L.nq:i], "opening": obs[..., i], "held": obs[..., i + 1],
            "prop_pos": props[..., :3], "prop_quat": props[..., 3:7], "prop_vel": props[..., 7:10],
            "prop_minus_jaw": props[..., 10:13],
            "zone_minus_prop": obs[..., i + 2 + 13 * P:].reshape(lead + (K, 3))}


def closing(L: EnvLayout, q_target):
    """(...,) bool: the gripper target lies on the closed side of its range's midpoint by more than
    CLOSE_BAND of the range (a target at the midpoint, such as a half-open start pose, is not a
    command to close)."""
    mid = 0.5 * (L.gripper_open + L.gripper_closed)
    band = CLOSE_BAND * abs(L.gripper_open - L.gripper_closed)
    g = q_target[..., L.gripper_q]
    return g < mid - band if L.gripper_closed < L.gripper_open else g > mid + band


def grasp_candidates(L: EnvLayout, xp, jaw_pos, jaw_rot, prop_pos):
    """(..., P) bool: props a closing gripper would take. jaw_pos (..., 3), jaw_rot (..., 3, 3)
    (jaw frame -> world), prop_pos (..., P, 3)."""
    d = prop_pos - jaw_pos[..., None, :]
    local = xp.einsum("...ji,...pj->...pi", jaw_rot, d) - xp.asarray(L.jaw_center, dtype=d.dtype)
    reach = xp.asarray(L.jaw_half, dtype=d.dtype) + xp.asarray(L.prop_reach, dtype=d.dtype)[:, None] \
        + L.grasp_margin
    return xp.all(xp.abs(local) <= reach, axis=-1)


def grasp_update(xp, held, close, candidates, friction: bool = False):
    """New held prop index (...,) int (-1: none): open releases, a closing gripper with nothing
    held takes the first candidate. A held prop stays held while the gripper closes; with
    ``friction`` (physics holds the prop, no weld) only while it also stays a candidate, so a prop
    that slipped out or was knocked away is no longer "held" although the gripper is still closed."""
    any_c = xp.any(candidates, axis=-1)
    first = xp.argmax(candidates, axis=-1).astype(held.dtype)
    take = xp.where(any_c, first, -1)
    keep = held >= 0
    if friction:
        inside = xp.take_along_axis(candidates, xp.maximum(held, 0)[..., None].astype(int), axis=-1)[..., 0]
        keep = keep & inside
    return xp.where(close, xp.where(keep, held, take), -1).astype(held.dtype)


# ---- randomisation ----------------------------------------------------------------------------------

#: Fixed draw order: each field draws from ``fold_in(key, index)``, so disabling one field never
#: changes another's draws.
RANDOM_FIELDS = ("prop_xy", "prop_yaw", "prop_mass", "prop_friction", "damping", "gain", "gravity")


@dataclass(frozen=True)
class EnvRandomization:
    """Per-world, per-episode draws. Offsets are absolute half-widths (uniform in [-a, a]):
    ``prop_xy`` (m) and ``prop_yaw`` (rad) move each prop's start pose. Factors are (lo, hi)
    multipliers: ``prop_mass`` (mass and inertia of each prop), ``prop_friction`` (sliding
    friction of each prop's geom), ``damping`` (each robot dof), ``gain`` (each servo's kp and kv
    together), ``gravity`` (the gravity vector). None keeps a field fixed."""

    prop_xy: float | None = 0.02
    prop_yaw: float | None = 0.3
    prop_mass: tuple | None = (0.8, 1.2)
    prop_friction: tuple | None = (0.8, 1.2)
    damping: tuple | None = (0.8, 1.2)
    gain: tuple | None = (0.9, 1.1)
    gravity: tuple | None = None

    def __post_init__(self):
        for name in ("prop_xy", "prop_yaw"):
            a = getattr(self, name)
            if a is not None and not (np.isfinite(a) and a >= 0):
                raise CaliperError(f"randomization {name}: expected a half-width >= 0, got {a!r}")
        for name in ("prop_mass", "prop_friction", "damping", "gain", "gravity"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                lo, hi = (float(x) for x in value)
            except (TypeError, ValueError):
                raise CaliperError(f"randomization {name}: expected (lo, hi), got {value!r}") from None
            if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo <= hi):
                raise CaliperError(f"randomization {name}: need 0 < lo <= hi, got ({lo}, {hi})")
            object.__setattr__(self, name, (lo, hi))


#: The named randomisation levels: "none" (every episode starts from the task file's nominal
#: scene), "default" (the task file's declared randomisation, else ``EnvRandomization()``) and
#: "wide" (twice the default prop offsets, wider physics factors and +-3 % gravity).
RANDOMIZATION_LEVELS = ("none", "default", "wide")
WIDE_RANDOMIZATION = EnvRandomization(prop_xy=0.04, prop_yaw=0.5, prop_mass=(0.5, 1.5),
                                      prop_friction=(0.6, 1.4), damping=(0.5, 2.0), gain=(0.8, 1.2),
                                      gravity=(0.97, 1.03))


def randomization_preset(level: str, task=None) -> EnvRandomization | None:
    """The :class:`EnvRandomization` of level ``level`` (:data:`RANDOMIZATION_LEVELS`); for
    "default", the one ``task`` (a :class:`tasks.schema.Task`, optional) declares, if any."""
    if level not in RANDOMIZATION_LEVELS:
        raise CaliperError(f"randomization level {level!r}: expected one of "
                           f"{', '.join(RANDOMIZATION_LEVELS)}")
    if level == "none":
        return None
    if level == "wide":
        return WIDE_RANDOMIZATION
    if task is not None and getattr(task, "randomization", None) is not None:
        return declared_randomization(task)
    return EnvRandomization()


def task_randomization(task, given, default):
    """The randomisation an env runs: ``given``, except that the env's default (``given is
    default``) gives way to the randomisation the task file declares (schema v2)."""
    if given is default and getattr(task, "randomization", None) is not None:
        return declared_randomization(task)
    return given


def declared_randomization(task) -> EnvRandomization | None:
    """The randomisation a (v2) task file declares (None when it declares none; a field it does
    not name stays fixed)."""
    if task.randomization is None:
        return None
    from tasks.schema import RANDOM_FIELDS

    return EnvRandomization(**{**dict.fromkeys(RANDOM_FIELDS), **dict(task.randomization)})


def draw(spec: EnvRandomization | None, key, shapes: dict) -> dict:
    """One draw per world: {field: (W, *shape) array} for every enabled field (pure jax, jittable).
    ``shapes``: {field: (W, *shape)} -- prop_xy (W, P, 2), prop_yaw / prop_mass / prop_friction
    (W, P), damping (W, nv), gain (W, nu), gravity (W,). Offsets are in [-a, a], factors in
    [lo, hi]."""
    import jax
    import jax.numpy as jnp

    out = {}
    if spec is None:
        return out
    for i, name in enumerate(RANDOM_FIELDS):
        value = getattr(spec, name)
        if value is None:
            continue
        u = jax.random.uniform(jax.random.fold_in(key, i), shapes[name], dtype=jnp.float32)
        if name in ("prop_xy", "prop_yaw"):
            out[name] = (2.0 * u - 1.0) * value
        else:
            lo, hi = value
            out[name] = lo + (hi - lo) * u
    return out


# ---- building the layout of a task (host side) ---------------------------------------------------

#: Episode length when the task gives no ``horizonS`` (s), and control rate without ``fps`` (Hz).
DEFAULT_HORIZON_S = 10.0
DEFAULT_FPS = 50


def jaw_body(task_scene) -> int:
    """MuJoCo body id of the gripper joint's body (the body grasp welds attach props to)."""
    ours = task_scene.model.body_id(task_scene.gripper.joint)
    return int(task_scene.scene.layout.body_id[ours])


def _geom_box(mj, g: int):
    """(lo, hi) (3,) corners of geom ``g``'s axis-aligned box in its body's frame."""
    import mujoco

    from caliper_jax.io.rotations import quat_to_mat

    T = mujoco.mjtGeom
    kind, size = int(mj.geom_type[g]), np.asarray(mj.geom_size[g], np.float64)
    R = np.asarray(quat_to_mat(np.asarray(mj.geom_quat[g], np.float64)), np.float64).reshape(3, 3)
    p = np.asarray(mj.geom_pos[g], np.float64)
    if kind == T.mjGEOM_MESH:
        a, n = int(mj.mesh_vertadr[mj.geom_dataid[g]]), int(mj.mesh_vertnum[mj.geom_dataid[g]])
        pts = p + np.asarray(mj.mesh_vert[a:a + n], np.float64) @ R.T
        return pts.min(axis=0), pts.max(axis=0)
    half = {T.mjGEOM_BOX: size[:3], T.mjGEOM_ELLIPSOID: size[:3], T.mjGEOM_SPHERE: size[[0, 0, 0]],
            T.mjGEOM_CAPSULE: np.array([size[0], size[0], size[0] + size[1]]),
            T.mjGEOM_CYLINDER: size[[0, 0, 1]]}.get(kind)
    if half is None:
        raise CaliperError(f"jaw geom {g}: geom type {mujoco.mjtGeom(kind).name} has no bounding box here")
    ext = np.abs(R) @ half
    return p - ext, p + ext


def jaw_box(task_scene) -> tuple[np.ndarray, np.ndarray]:
    """(centre (3,), half extents (3,)) of the axis-aligned box, in the jaw body's frame, around
    that body's collision geoms (those with a nonzero contype or conaffinity)."""
    mj = task_scene.scene.mj
    body = jaw_body(task_scene)
    geoms = [g for g in range(mj.ngeom) if int(mj.geom_bodyid[g]) == body
             and (int(mj.geom_contype[g]) or int(mj.geom_conaffinity[g]))]
    if not geoms:
        raise CaliperError(f"task {task_scene.task.name}: gripper body {task_scene.gripper.joint!r} has no "
                           "collision geometry, so no prop can be grasped")
    boxes = [_geom_box(mj, g) for g in geoms]
    lo = np.min([b[0] for b in boxes], axis=0)
    hi = np.max([b[1] for b in boxes], axis=0)
    return 0.5 * (lo + hi), 0.5 * (hi - lo)


def prop_reach(prop) -> float:
    """Smallest half size of a prop: box min half extent, sphere radius, cylinder min(radius,
    half length)."""
    return float(min(prop.size)) if prop.kind in ("box", "cylinder") else float(prop.size[0])


def control_rates(task, timestep: float) -> tuple[int, int, int]:
    """(fps, substeps, horizon ticks) of a task on a scene of ``timestep`` seconds. ``fps`` must
    divide the physics rate: ``1 / (fps * timestep)`` an integer to 1e-9 relative."""
    fps = DEFAULT_FPS if task.fps is None else task.fps
    if not (isinstance(fps, (int, np.integer)) and fps > 0):
        raise CaliperError(f"task {task.name}: fps must be a positive integer, got {fps!r}")
    ratio = 1.0 / (fps * timestep)
    substeps = round(ratio)
    if substeps < 1 or abs(substeps - ratio) > 1e-9 * ratio:
        raise CaliperError(f"task {task.name}: fps={fps} is not an integer divisor of the physics rate "
                           f"1/timestep = {1.0 / timestep:g} Hz (1/(fps*timestep) = {ratio:.12g})")
    horizon_s = DEFAULT_HORIZON_S if task.horizon_s is None else float(task.horizon_s)
    horizon = round(horizon_s * fps)
    if not (np.isfinite(horizon_s) and horizon >= 1):
        raise CaliperError(f"task {task.name}: horizonS={horizon_s!r} gives no control tick at {fps} fps")
    return int(fps), int(substeps), int(horizon)


def make_layout(task_scene) -> EnvLayout:
    """The :class:`EnvLayout` of a built task (:class:`tasks.scene.TaskScene`): the jaw box from
    the MjModel's collision geoms of the gripper body, each prop's reach, the (prop, zone) pairs
    of the success predicate, and the control rate (``task.fps`` or 50; ``horizonS`` or 10 s)."""
    from tasks.predicates import zone_pairs

    task, model, g = task_scene.task, task_scene.model, task_scene.gripper
    names = tuple(p.name for p in task.props)
    pairs = zone_pairs(task.success) if task.success is not None else []
    center, half = jaw_box(task_scene)
    fps, substeps, horizon = control_rates(task, task_scene.scene.timestep)
    return EnvLayout(
        nq=int(model.nq), nv=int(model.nv), prop_names=names,
        pair_props=tuple(names.index(p) for p, _ in pairs),
        pair_centers=np.array([z.center for _, z in pairs], dtype=np.float64).reshape(-1, 3),
        gripper_q=int(g.q_index), gripper_open=float(g.open), gripper_closed=float(g.closed),
        jaw_center=center, jaw_half=half,
        prop_reach=np.array([prop_reach(p) for p in task.props], dtype=np.float64),
        fps=fps, substeps=substeps, horizon=horizon,
        friction=getattr(task_scene, "grasp", "weld") == "friction")


def yaw_quat(xp, yaw):
    """(..., 4) quaternion (w, x, y, z) of a rotation by ``yaw`` (...,) about world z."""
    h = 0.5 * yaw
    z = xp.zeros_like(h)
    return xp.stack([xp.cos(h), z, z, xp.sin(h)], axis=-1)


__all__ = ["DEFAULT_FPS", "DEFAULT_HORIZON_S", "EnvLayout", "EnvRandomization", "GRASP_MARGIN",
           "RANDOMIZATION_LEVELS", "RANDOM_FIELDS", "WIDE_RANDOMIZATION", "closing", "control_rates", "draw",
           "grasp_candidates", "grasp_update", "jaw_body", "jaw_box", "make_layout", "observation",
           "observation_parts", "prop_reach", "randomization_preset", "task_randomization", "yaw_quat"]
