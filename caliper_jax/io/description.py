"""The host-side description of a kinematic tree, before it becomes a JAX pytree.

A *body* is the child of one moving joint: links rigidly attached through fixed joints are merged
into it (their inertia added, their origin kept as a *frame*). Every placement ``(R, p)`` maps
child coordinates into parent coordinates: ``x_parent = R @ x_child + p``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

JOINT_NQ = {"revolute": 1, "prismatic": 1, "ball": 4, "free": 7}
JOINT_NV = {"revolute": 1, "prismatic": 1, "ball": 3, "free": 6}


@dataclass
class Body:
    """One moving joint and the rigid body it carries.

    ``R, p``: the joint frame at q = neutral, in the parent body's frame. ``axis``: joint axis in
    the joint frame (revolute/prismatic). Inertia: ``mass``, ``com`` (3,) and ``inertia`` (3,3,
    about the COM) in the body frame. Limits are per position coordinate (``lower``/``upper``)
    and per velocity coordinate (the rest); ``mimic`` is (source joint, multiplier, offset).
    """

    name: str
    type: str
    parent: int
    R: np.ndarray
    p: np.ndarray
    axis: np.ndarray
    mass: float = 0.0
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    velocity: np.ndarray | None = None
    effort: np.ndarray | None = None
    damping: np.ndarray | None = None
    friction: np.ndarray | None = None
    armature: np.ndarray | None = None
    mimic: tuple[str, float, float] | None = None

    @property
    def nq(self) -> int:
        return JOINT_NQ[self.type]

    @property
    def nv(self) -> int:
        return JOINT_NV[self.type]

    def add_inertia(self, mass: float, com: np.ndarray, inertia: np.ndarray) -> None:
        """Merge a rigid inertia (com, inertia about com, both in this body's frame)."""
        if mass <= 0.0 and not np.any(inertia):
            return
        total = self.mass + mass
        new_com = (self.mass * self.com + mass * com) / total if total > 0 else self.com
        self.inertia = _shift(self.inertia, self.mass, self.com - new_com) + _shift(
            inertia, mass, com - new_com
        )
        self.com, self.mass = new_com, total


def _shift(inertia_com: np.ndarray, mass: float, d: np.ndarray) -> np.ndarray:
    """Parallel-axis theorem: inertia about a point offset by ``-d`` from the COM."""
    return inertia_com + mass * (np.dot(d, d) * np.eye(3) - np.outer(d, d))


@dataclass
class Frame:
    """A named frame rigidly attached to body ``parent`` (-1: the world) at ``(R, p)``."""

    name: str
    parent: int
    R: np.ndarray
    p: np.ndarray
    kind: str = "link"


@dataclass(frozen=True)
class Geom:
    """Collision or visual geometry attached to a body, in that body's frame.

    ``kind``: box (size = half extents), sphere (radius,), cylinder / capsule (radius, half
    length) or mesh (size = scale). ``mesh``: the resolved file or None; ``tried``: every path
    tried when it could not be resolved.
    """

    link: str
    body: int
    role: str
    kind: str
    R: tuple
    p: tuple
    size: tuple
    mesh: str | None = None
    mesh_uri: str | None = None
    tried: tuple = ()


@dataclass
class RobotDescription:
    """A whole robot: bodies in topological order (parents first), frames and geometry."""

    name: str
    bodies: list[Body]
    frames: list[Frame]
    geoms: list[Geom] = field(default_factory=list)
    source: str = ""
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    warnings: list[str] = field(default_factory=list)
