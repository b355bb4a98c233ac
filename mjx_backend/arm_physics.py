"""What a real arm adds to its generated MJCF beyond the URDF: gravity compensation, joint
armature / damping, and friction pads on the gripper (the physical grasp).

Friction grasping in MuJoCo needs (i) pad geoms with enough contact dimensions -- ``condim`` 4
adds torsional friction about the contact normal, so a prop pinched between two pads does not
spin about the pinch axis -- and (ii) a friction coefficient that belongs to the prop: MuJoCo
combines two geoms' friction by the element-wise maximum unless one has a higher ``priority``.
Props are therefore written with ``priority=1`` (and the pad ``condim``) in a scene with pads, so
a prop's own material decides how well it can be held; a prop with friction 0 cannot be lifted
by pinching, as physics says.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from caliper_jax.errors import CaliperError
from mjx_backend.materials import Material

CONDIMS = (1, 3, 4, 6)


@dataclass(frozen=True)
class ArmPhysics:
    """``gravcomp``: every robot body gets ``gravcomp="1"`` (the arm's controller cancels gravity,
    as the Panda's does) except the joints in ``no_gravcomp``. ``armature`` / ``damping``:
    {joint: value} replacing the Model's (N m s^2/rad or kg; N m s/rad or N s/m). ``pad_links``:
    links whose collision geoms are contact pads with ``pad_material`` and ``pad_condim``.
    ``mimic_solref`` / ``mimic_solimp``: the mimic equalities' constraint softness (None: MuJoCo's
    default 0.02 s, which lets a pinched prop push the follower finger back by millimetres)."""

    gravcomp: bool = False
    no_gravcomp: tuple = ()
    armature: dict = field(default_factory=dict)
    damping: dict = field(default_factory=dict)
    pad_links: tuple = ()
    pad_material: Material | None = None
    pad_condim: int = 4
    mimic_solref: tuple | None = None    # stiffer coupling of mimic joints (two fingers, one motor)
    mimic_solimp: tuple = (0.95, 0.99, 0.001)
    pad_boxes: tuple = ()
    self_collide: bool = True

    def __post_init__(self):
        if self.pad_condim not in CONDIMS:
            raise CaliperError(f"pad_condim={self.pad_condim}: expected one of {CONDIMS}")
        for what in ("armature", "damping"):
            for joint, value in getattr(self, what).items():
                if not np.isfinite(value) or value < 0:
                    raise CaliperError(f"{what}[{joint!r}] must be finite and >= 0, got {value}")
        for link, center, half in self.pad_boxes:
            if link not in self.pad_links or len(center) != 3 or len(half) != 3 or min(half) <= 0:
                raise CaliperError(f"pad_boxes[{link!r}]: needs a pad link, a centre (3,) and half extents "
                                   f"(3,) > 0, got {center}, {half}")

    def box_links(self) -> set:
        """Links whose collision geoms ``pad_boxes`` replaces."""
        return {link for link, _, _ in self.pad_boxes}

    def override(self, model, what: str, values) -> np.ndarray:
        """(nv,) ``values`` (the Model's ``dof_<what>``) with this arm's {joint: value} written in."""
        table = getattr(self, what)
        out = np.array(values, copy=True)
        for joint, value in table.items():
            if joint not in model.body_names:
                raise CaliperError(f"arm {what}: {model.name!r} has no joint {joint!r}")
            out[model.vfull_src[model.body_vadr[model.body_id(joint)]]] = value
        return out

    def __hash__(self):
        return hash((self.gravcomp, self.no_gravcomp, tuple(sorted(self.armature.items())),
                     tuple(sorted(self.damping.items())), self.pad_links, self.pad_material, self.pad_condim,
                     self.mimic_solref, self.mimic_solimp,
                     tuple((link, tuple(c), tuple(h)) for link, c, h in self.pad_boxes), self.self_collide))


__all__ = ["ArmPhysics", "CONDIMS"]
