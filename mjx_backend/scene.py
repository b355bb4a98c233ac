"""Props: free-floating boxes, spheres and cylinders placed in the scene around the robot.

Sizes follow MuJoCo: box half extents, sphere radius, cylinder (radius, half length along z).
Each prop carries its mass, its contact material, and a rotational inertia computed here (the
generated MJCF states every inertia explicitly; nothing is inferred from geometry density).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from caliper_jax.errors import CaliperError
from mjx_backend.materials import Material, resolve_material

PROP_KINDS = ("box", "sphere", "cylinder")
_SIZE_LEN = {"box": 3, "sphere": 1, "cylinder": 2}


@dataclass(frozen=True)
class Prop:
    name: str
    kind: str
    size: tuple
    pos: tuple = (0.0, 0.0, 0.0)
    quat: tuple = (1.0, 0.0, 0.0, 0.0)    # (w, x, y, z)
    mass: float = 0.1
    material: Material | None = None
    rgba: tuple = (0.8, 0.5, 0.2, 1.0)
    velocity: tuple = field(default=(0.0,) * 6)  # initial MuJoCo free-joint qvel (world lin, local ang)

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise CaliperError("prop: a non-empty name is required")
        if self.kind not in PROP_KINDS:
            raise CaliperError(f"prop {self.name!r}: kind {self.kind!r} is not one of "
                               f"{', '.join(PROP_KINDS)}")
        size = _floats(self.size, _SIZE_LEN[self.kind], f"prop {self.name!r} size")
        if any(s <= 0 for s in size):
            raise CaliperError(f"prop {self.name!r}: sizes must be > 0, got {size}")
        quat = np.array(_floats(self.quat, 4, f"prop {self.name!r} quat"))
        norm = float(np.linalg.norm(quat))
        if norm < 1e-9:
            raise CaliperError(f"prop {self.name!r}: zero quaternion")
        if not (math.isfinite(self.mass) and self.mass > 0):
            raise CaliperError(f"prop {self.name!r}: mass must be > 0, got {self.mass}")
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "pos", _floats(self.pos, 3, f"prop {self.name!r} pos"))
        object.__setattr__(self, "quat", tuple(float(x) for x in quat / norm))
        object.__setattr__(self, "velocity", _floats(self.velocity, 6, f"prop {self.name!r} velocity"))
        object.__setattr__(self, "rgba", _floats(self.rgba, 4, f"prop {self.name!r} rgba"))
        object.__setattr__(self, "material", resolve_material(self.material))

    @classmethod
    def box(cls, name, half_extents, pos, **kw) -> "Prop":
        return cls(name, "box", tuple(half_extents), tuple(pos), **kw)

    @classmethod
    def sphere(cls, name, radius, pos, **kw) -> "Prop":
        return cls(name, "sphere", (radius,), tuple(pos), **kw)

    @classmethod
    def cylinder(cls, name, radius, length, pos, **kw) -> "Prop":
        """``length``: the full length along the prop's z axis."""
        return cls(name, "cylinder", (radius, length / 2.0), tuple(pos), **kw)

    @classmethod
    def from_dict(cls, spec: Mapping) -> "Prop":
        """The task-artifact prop: name, kind, halfExtents | radius (+ length, full), pos, quat,
        mass, rgba, material."""
        allowed = {"name", "kind", "halfExtents", "radius", "length", "pos", "quat", "mass", "rgba",
                   "material"}
        unknown = set(spec) - allowed
        if unknown:
            raise CaliperError(f"prop: unknown key(s) {', '.join(sorted(unknown))}")
        kind = spec.get("kind")
        name = spec.get("name", "")
        if kind == "box":
            size = tuple(spec.get("halfExtents", ()))
        elif kind == "sphere":
            size = (spec.get("radius"),)
        elif kind == "cylinder":
            if "length" not in spec:
                raise CaliperError(f"prop {name!r}: a cylinder needs radius and length")
            size = (spec.get("radius"), float(spec["length"]) / 2.0)
        else:
            raise CaliperError(f"prop {name!r}: kind {kind!r} is not one of {', '.join(PROP_KINDS)}")
        kw = {k: spec[k] for k in ("quat", "mass", "rgba", "material") if k in spec}
        return cls(name, kind, size, tuple(spec.get("pos", (0.0, 0.0, 0.0))), **kw)

    def inertia(self) -> np.ndarray:
        """Principal moments about the centre, prop axes (solid, uniform density)."""
        m = self.mass
        if self.kind == "box":
            a, b, c = self.size
            return m / 3.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
        if self.kind == "sphere":
            return np.full(3, 0.4 * m * self.size[0] ** 2)
        r, h = self.size
        side = m * (3.0 * r * r + 4.0 * h * h) / 12.0
        return np.array([side, side, 0.5 * m * r * r])


def half_height(prop: Prop) -> float:
    """Vertical half extent (m) of ``prop`` at its start orientation (world z)."""
    from caliper_jax.io.rotations import quat_to_mat

    R = np.asarray(quat_to_mat(np.asarray(prop.quat, np.float64)[None]))[0]
    if prop.kind == "sphere":
        return float(prop.size[0])
    if prop.kind == "box":
        return float(np.abs(R[2]) @ np.asarray(prop.size))
    r, h = prop.size
    c = abs(R[2, 2])
    return float(h * c + r * np.sqrt(max(0.0, 1.0 - c * c)))


def _floats(value, n: int, what: str) -> tuple:
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise CaliperError(f"{what}: expected {n} numbers, got {value!r}") from None
    if len(out) != n or not all(math.isfinite(v) for v in out):
        raise CaliperError(f"{what}: expected {n} finite numbers, got {value!r}")
    return out


def as_props(props) -> tuple:
    """A tuple of Props from Props or task-style dicts; names must be unique."""
    out = tuple(p if isinstance(p, Prop) else Prop.from_dict(p) for p in (props or ()))
    names = [p.name for p in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise CaliperError(f"duplicate prop name(s): {', '.join(dup)}")
    return out


__all__ = ["Prop", "PROP_KINDS", "as_props", "half_height"]
