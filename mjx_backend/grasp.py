"""Weld-based grasping: the way sim teleop rigs pick props up, labelled as what it is.

Not finger-friction physics: when the gripper is commanded closed and a prop touches the robot,
the prop is welded to the gripper body with its relative pose captured at that instant (so the
activation does not snap); opening releases it. One prop at a time; ``reset()`` releases. A
MuJoCo weld is a soft constraint, so a carried prop sags slightly under hard swings. Contact with
any robot geom counts, so a prop leaning on the forearm can be taken.

The welds themselves are generated with the scene (``weld_body=...``: one inactive weld per
prop); this module detects the gripper and toggles them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.io.rotations import quat_conj, quat_mul
from caliper_jax.model import Model

GRIPPER_WORDS = ("gripper", "finger", "jaw", "claw", "hand")
INSET = 0.02


@dataclass(frozen=True)
class Gripper:
    joint: str
    q_index: int         # our independent q index
    open: float          # targets inset 2% of the range from the limits
    closed: float


def detect_gripper(model: Model, joint: str | None = None, closed: str = "lo") -> Gripper:
    """The gripper joint: ``joint`` if given, else the most distal non-mimic joint whose name or
    child link name contains gripper/finger/jaw/claw/hand and which has both limits.
    ``closed``: which limit closes it, "lo" or "hi"."""
    if closed not in ("lo", "hi"):
        raise CaliperError(f"gripper closed={closed!r}: expected 'lo' or 'hi'")
    lower, upper = np.asarray(model.qpos_lower, np.float64), np.asarray(model.qpos_upper, np.float64)
    candidates = []
    for i, name in enumerate(model.body_names):
        if model.vfull_mimic[model.body_vadr[i]] >= 0 or model.jnt_type[i] not in ("revolute", "prismatic"):
            continue
        qa = model.qfull_src[model.body_qadr[i]]
        if joint is not None:
            if name == joint:
                candidates = [(0, i, qa)]
                break
            continue
        links = [f for f, b, k in zip(model.frame_names, model.frame_body, model.frame_kind, strict=True)
                 if b == i and k == "link"]
        text = " ".join([name] + links).lower()
        if any(w in text for w in GRIPPER_WORDS) and np.isfinite(lower[qa]) and np.isfinite(upper[qa]):
            candidates.append((len(model.supports(i)), i, qa))
    if not candidates:
        what = f"1-dof joint named {joint!r}" if joint else \
            "gripper joint (a name containing gripper/finger/jaw/claw/hand, with both limits)"
        raise CaliperError(f"{model.name}: found no {what}")
    _, i, qa = max(candidates)
    lo, hi = float(lower[qa]), float(upper[qa])
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise CaliperError(f"{model.name}: gripper joint {model.body_names[i]!r} needs both limits")
    inset = INSET * (hi - lo)
    lo_t, hi_t = lo + inset, hi - inset
    return Gripper(model.body_names[i], int(qa), hi_t if closed == "lo" else lo_t,
                   lo_t if closed == "lo" else hi_t)


def relative_pose(d, body1: int, body2: int) -> np.ndarray:
    """Pose of body2 in body1's frame, [pos, quat], from an MjData after forward kinematics."""
    R1 = np.asarray(d.xmat[body1]).reshape(3, 3)
    pos = R1.T @ (np.asarray(d.xpos[body2]) - np.asarray(d.xpos[body1]))
    quat = quat_mul(quat_conj(d.xquat[body1]), d.xquat[body2])
    return np.concatenate([pos, quat / np.linalg.norm(quat)])


class WeldGrasp:
    """Toggle the grasp welds of a backend built with ``weld_body``. ``update(world, closed)``
    after each tick; ``held(world)`` says which prop is attached."""

    def __init__(self, backend):
        scene = backend.scene
        if not scene.layout.weld_eq:
            raise CaliperError("WeldGrasp: the scene has no grasp welds "
                               "(build it with props and weld_body=...)")
        import mujoco

        self.backend = backend
        self.body = mujoco.mj_name2id(scene.mj, mujoco.mjtObj.mjOBJ_BODY, scene.mjcf.weld_body)

    def held(self, world: int = 0) -> str | None:
        active = [p for p, on in self.backend.weld_active(world).items() if on]
        return active[0] if active else None

    def touching(self, world: int = 0) -> list[str]:
        """Props in contact with any robot geom, in prop order."""
        L = self.backend.layout
        d = self.backend.world_data(world)
        pairs = [{int(d.contact[i].geom1), int(d.contact[i].geom2)} for i in range(d.ncon)]
        return [prop for prop, g in L.prop_geom.items()
                if any(g in pair and (pair - {g}) & L.robot_geoms for pair in pairs)]

    def update(self, closed: bool, world: int = 0) -> str | None:
        """Closed with nothing held: weld the first touching prop at its current relative pose.
        Open: release. Returns the held prop (or None)."""
        held = self.held(world)
        if not closed:
            if held is not None:
                self.backend.set_weld(world, held, False)
            return None
        if held is not None:
            return held
        touching = self.touching(world)
        if not touching:
            return None
        prop = touching[0]
        d = self.backend.world_data(world)
        rel = relative_pose(d, self.body, self.backend.layout.prop_body[prop])
        self.backend.set_weld(world, prop, True, rel)
        return prop


__all__ = ["GRIPPER_WORDS", "Gripper", "WeldGrasp", "detect_gripper", "relative_pose"]
