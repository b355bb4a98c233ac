"""The Jog tab's collision scene at a fixed capacity, so a new or moved obstacle never recompiles.

:class:`PaddedScene` builds one :class:`caliper_jax.collision.CollisionModel` per robot with a
fixed slot layout: the ground half-space and ``capacity`` boxes (``box0`` ...). The compiled
collision check depends only on that layout (kinds and pairs; the names and poses are not part of
the jit key), so placing obstacles replaces the pose / extent rows of the model's arrays and
nothing else: an unused box slot is parked far away (``FAR``), the ground turned off is moved
``FAR`` below. ``active`` names the obstacles really in the scene; the report
(:func:`caliper_jax.studio.jog.collision_status`) leaves the parked slots out. More boxes than
the capacity grow it to the next power of two (one rebuild and one recompile, said in ``notes``).
The planning checker keeps its world the same way (``caliper_jax.planning.spherecheck``).
"""

from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError

FAR = 1.0e3  # m: where unused slots are parked
CAPACITY = 8  # box slots of a new scene
_PARKED_HALF = 1e-3


def _parked(k: int) -> np.ndarray:
    return np.array([FAR, FAR + 0.01 * k, FAR])


class PaddedScene:
    """Ground + ``capacity`` box slots for ``model``. ``place(ground, boxes)`` returns the model
    with those obstacles (``boxes``: box Colliders, any names; slot k is named ``box{k}``)."""

    def __init__(self, model, capacity: int = CAPACITY):
        if int(capacity) < 1:
            raise CaliperError(f"scene capacity must be >= 1, got {capacity}")
        self.model, self.capacity = model, int(capacity)
        self.notes = []
        self._build()
        self.place(True, [])

    def _build(self) -> None:
        from caliper_jax.collision import build_collision_model
        from caliper_jax.collision.geometry import box, ground

        slots = [ground(0.0)] + [
            box(_parked(k), (_PARKED_HALF,) * 3, name=f"box{k}") for k in range(self.capacity)
        ]
        self.base = build_collision_model(self.model, slots)
        self.row = {n: i for i, n in enumerate(self.base.names) if i >= self.base.n_robot}
        self._R = np.array(self.base.R, np.float64)
        self._p = np.array(self.base.p, np.float64)
        self._half = np.array(self.base.half, np.float64)

    def place(self, ground: bool, boxes) -> object:
        """The collision model with the ground (on / off) and ``boxes``; the same compiled check
        serves every placement up to the capacity."""
        import jax.numpy as jnp

        boxes = list(boxes)
        if any(b.kind != "box" for b in boxes):
            raise CaliperError("scene: only box obstacles go in the box slots")
        if len(boxes) > self.capacity:
            grown = 1 << (len(boxes) - 1).bit_length()
            self.notes.append(f"{len(boxes)} boxes: capacity {self.capacity} -> {grown} (one recompile)")
            self.capacity = grown
            self._build()
        R, p, half = self._R.copy(), self._p.copy(), self._half.copy()
        g = self.row["ground"]
        p[g] = (0.0, 0.0, 0.0) if ground else (0.0, 0.0, -FAR)
        for k in range(self.capacity):
            i = self.row[f"box{k}"]
            if k < len(boxes):
                R[i], p[i], half[i] = boxes[k].R, boxes[k].p, boxes[k].half
            else:
                R[i], p[i], half[i] = np.eye(3), _parked(k), _PARKED_HALF
        dt = self.base.p.dtype
        self.cm = self.base.replace(R=jnp.asarray(R, dt), p=jnp.asarray(p, dt), half=jnp.asarray(half, dt))
        self.active = (("ground",) if ground else ()) + tuple(f"box{k}" for k in range(len(boxes)))
        return self.cm


__all__ = ["CAPACITY", "FAR", "PaddedScene"]
