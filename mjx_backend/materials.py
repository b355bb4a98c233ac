"""Contact materials: MuJoCo's per-geom ``solref``, ``solimp`` and ``friction`` as one named value.

Five presets cover the usual props (rigid, steel, rubber, foam, wood); a custom material is a
mapping with the same three keys and is validated when it is resolved, so a bad value fails
when the scene is built, not as a blow-up mid-rollout.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Mapping

from caliper_jax.errors import CaliperError


@dataclass(frozen=True)
class Material:
    """``solref`` (timeconst, dampratio), ``solimp`` (dmin, dmax, width), ``friction``
    (sliding, torsional, rolling) -- MuJoCo's geom attributes of the same names."""

    name: str
    solref: tuple
    solimp: tuple
    friction: tuple

    def attributes(self) -> dict:
        """The MJCF geom attributes carrying this material."""
        return {"solref": _fmt(self.solref), "solimp": _fmt(self.solimp), "friction": _fmt(self.friction)}


def _fmt(values) -> str:
    return " ".join(repr(float(v)) for v in values)


PRESETS = {
    "rigid": Material("rigid", (0.002, 1.0), (0.95, 0.99, 0.001), (1.0, 0.005, 0.0001)),
    "steel": Material("steel", (0.002, 1.0), (0.95, 0.99, 0.001), (0.4, 0.005, 0.0001)),
    "rubber": Material("rubber", (0.01, 1.0), (0.9, 0.95, 0.001), (1.2, 0.01, 0.0002)),
    "foam": Material("foam", (0.04, 1.0), (0.5, 0.8, 0.01), (0.8, 0.005, 0.0001)),
    "wood": Material("wood", (0.005, 1.0), (0.9, 0.95, 0.002), (0.45, 0.005, 0.0001)),
}


def _numbers(value, n: int, what: str, name: str) -> tuple:
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise CaliperError(f"material {name!r}: {what} must be {n} numbers, got {value!r}") from None
    if len(out) != n:
        raise CaliperError(f"material {name!r}: {what} must be {n} numbers, got {len(out)}")
    if not all(math.isfinite(v) for v in out):
        raise CaliperError(f"material {name!r}: {what} has a non-finite value {out}")
    return out


def validate_material(solref, solimp, friction, name: str = "custom") -> Material:
    """A checked custom material: timeconst > 0 and dampratio > 0; dmin, dmax in (0, 1) with
    dmin <= dmax; width > 0; friction coefficients >= 0."""
    solref = _numbers(solref, 2, "solref (timeconst, dampratio)", name)
    solimp = _numbers(solimp, 3, "solimp (dmin, dmax, width)", name)
    friction = _numbers(friction, 3, "friction (sliding, torsional, rolling)", name)
    timeconst, dampratio = solref
    if timeconst <= 0:
        raise CaliperError(f"material {name!r}: solref timeconst must be > 0, got {timeconst}")
    if dampratio <= 0:
        raise CaliperError(f"material {name!r}: solref dampratio must be > 0, got {dampratio}")
    dmin, dmax, width = solimp
    for label, v in (("dmin", dmin), ("dmax", dmax)):
        if not 0.0 < v < 1.0:
            raise CaliperError(f"material {name!r}: solimp {label} must lie in (0, 1), got {v}")
    if dmin > dmax:
        raise CaliperError(f"material {name!r}: solimp dmin ({dmin}) must not exceed dmax ({dmax})")
    if width <= 0:
        raise CaliperError(f"material {name!r}: solimp width must be > 0, got {width}")
    if any(f < 0 for f in friction):
        raise CaliperError(f"material {name!r}: friction coefficients must be >= 0, got {friction}")
    return Material(name, solref, solimp, friction)


def resolve_material(spec) -> Material | None:
    """None (MuJoCo's defaults), a preset name, a :class:`Material`, or a mapping with keys
    ``solref``, ``solimp``, ``friction`` (and optionally ``name``)."""
    if spec is None or isinstance(spec, Material):
        return spec
    if isinstance(spec, str):
        key = spec.strip().lower()
        if key in PRESETS:
            return PRESETS[key]
        close = difflib.get_close_matches(key, PRESETS, n=2)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise CaliperError(f"unknown material {spec!r} (presets: {', '.join(PRESETS)}){hint}")
    if isinstance(spec, Mapping):
        keys = {"name", "solref", "solimp", "friction"}
        unknown = set(spec) - keys
        if unknown:
            raise CaliperError(f"material: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                               "expected solref, solimp, friction")
        missing = {"solref", "solimp", "friction"} - set(spec)
        if missing:
            raise CaliperError(f"material: missing key(s) {', '.join(sorted(missing))}")
        return validate_material(spec["solref"], spec["solimp"], spec["friction"],
                                 str(spec.get("name", "custom")))
    raise CaliperError(f"material must be a preset name or a mapping, got {type(spec).__name__}")


__all__ = ["Material", "PRESETS", "resolve_material", "validate_material"]
