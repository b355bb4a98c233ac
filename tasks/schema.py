"""The task artifact (``*.caliper-task.json``, schema versions 1 and 2): the data model.

A task is one JSON file: robot (a URDF path relative to the task file), start pose, scene (ground,
props, zones), gripper, success predicate, horizon and fps; schema v2 adds an optional dense
``"reward"`` block (:mod:`tasks.rewards`; a v1 file loads unchanged, its reward the 0/1 success
flag). Zones are for the evaluator only and
never become physics. The loader (:func:`load_task`) rejects unknown keys at every level, naming
the key path.

Why a hand-written loader and not jsonschema (measured, ``benchmarks/bench_schema.py``): a JSON
Schema can state the structure only -- not the robot file, the material presets, the cross-field
rules -- and its messages lack the file and the suggestion ("[]: Additional properties are not
allowed ('horizn_s' was unexpected)" against ours "FILE: horizn_s: unknown key (did you mean
'horizonS'?)"). jsonschema checks lift-cube's top-level structure in 0.11 ms, the loader parses,
checks every level and builds the Task in 0.76 ms (loaded machine): not a cost worth a second
validator. Kept; the graph files' validator (caliper_jax.graph.validate) was not measured.
Version 2 (a superset: every version-1 file loads unchanged) adds
- ``robot`` may be a registry name (``"panda"``, ``"so101"``; ``caliper info`` lists them);
- ``grasp``: ``"friction"`` (pads and physics, the default on a registry arm) or ``"weld"`` (the
  labelled heuristic, the only grasp of ``gripper_arm``);
- ``expert``: the skill of the task's scripted expert on a registry arm, ``"pick"`` (grasp, lift,
  place; the default), ``"push"`` (push the prop into the success zone without grasping) or
  ``"insert"`` (pick, line the prop up with the world axes, lower it into the zone: a peg into a hole);
- ``scene.fixtures``: static boxes fixed to the world (a peg's hole), never randomised;
- ``randomization``: the task's declared per-episode randomisation, the fields of
  :class:`tasks.env_spec.EnvRandomization` (``prop_xy``, ``prop_yaw`` half-widths; ``prop_mass``,
  ``prop_friction``, ``damping``, ``gain``, ``gravity`` as ``[lo, hi]`` factors; null: fixed).
"""
from __future__ import annotations

import difflib
import itertools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError, NotFoundError
from caliper_jax.limits import check_depth, read_text
from mjx_backend.materials import PRESETS, resolve_material
from mjx_backend.scene import Prop, half_height
from tasks.rewards import RewardSpec, parse_reward, reward_to_dict

SCHEMA_VERSION = 2
SCHEMA_VERSIONS = (1, 2)


@dataclass(frozen=True)
class Zone:
    """An axis-aligned box in the world frame (m): evaluator-only, never physics."""

    name: str
    center: tuple            # (3,)
    half: tuple              # (3,) half extents, > 0
    rgba: tuple = (0.2, 0.8, 0.4, 0.35)


# ---- success predicates (the JSON "kind" in brackets) ---------------------------------------------

@dataclass(frozen=True)
class Lifted:
    """[lifted] ``ref="initial"``: z - z0 >= height (height > 0); ``"absolute"``: z >= height;
    ``held``: and the prop is in the gripper now (a knocked-up prop does not count)."""

    prop: str
    height: float
    ref: str = "initial"
    held: bool = False


@dataclass(frozen=True)
class PlacedInZone:
    """[placed_in_zone] the prop's centre inside the zone (faces inclusive) and, when
    ``settled_speed`` is given, its linear speed <= settled_speed (m/s); ``released``: and the
    prop was in the gripper earlier in the episode and is not now (placed, not pushed or held);
    ``pushed``: and the prop was never carried this episode (pushed there, not lifted there).
    ``released`` and ``pushed`` exclude each other."""

    prop: str
    zone: Zone
    settled_speed: float | None = None
    released: bool = False
    pushed: bool = False


@dataclass(frozen=True)
class Reached:
    """[reached] the gripper point (the jaw box centre, :func:`tasks.rewards.grip_point`) within
    ``tolerance`` (m, > 0) of the goal point: the prop's centre raised by ``above`` (m, >= 0) --
    a reaching task's target is a marker prop (moved by the ``prop_xy`` randomisation) and the
    point hovering over it."""

    prop: str
    tolerance: float
    above: float = 0.0


@dataclass(frozen=True)
class Stacked:
    """[stacked] ``prop`` rests on ``on``: the centres' height difference within ``tolerance`` (m) of
    ``rise`` (A's bottom face on B's top face), their horizontal distance <= ``xy`` (m); when
    ``settled_speed`` is given, both props' linear speeds <= it (m/s); ``released``: ``prop`` was
    carried earlier in the episode and neither prop is in the gripper now (stacked and let go).
    ``rise`` is not written in the file: the loader derives it from the two props' vertical half
    extents at their start orientations (:func:`mjx_backend.scene.half_height`)."""

    prop: str
    on: str
    tolerance: float
    xy: float
    settled_speed: float | None = None
    released: bool = False
    rise: float = 0.0


@dataclass(frozen=True)
class AllOf:
    """[all_of] every term holds (every term is evaluated)."""

    terms: tuple


@dataclass(frozen=True)
class AnyOf:
    """[any_of] at least one term holds (every term is evaluated)."""

    terms: tuple


Predicate = Lifted | PlacedInZone | Reached | Stacked | AllOf | AnyOf


@dataclass(frozen=True)
class GripperSpec:
    """Which joint is the gripper (None: detected by name) and which limit closes it."""

    joint: str | None = None
    closed: str = "lo"


@dataclass(frozen=True)
class Task:
    name: str
    robot: Path                        # absolute, resolved against the task file's folder
    q0: tuple | None = None            # (nq,) start pose; None: zeros
    ground: float | None = 0.0         # ground plane height (m)
    props: tuple = ()                  # mjx_backend.scene.Prop
    zones: tuple = ()                  # Zone
    gripper: GripperSpec | None = None
    success: Predicate | None = None
    horizon_s: float | None = None
    fps: int | None = None
    source: Path | None = None         # the file it was loaded from
    version: int = 1                   # schema version it was written in
    robot_name: str | None = None      # the registry name when ``robot`` was given as one (v2)
    grasp: str | None = None           # "weld" | "friction" | None (the robot's default) (v2)
    randomization: tuple | None = None  # ((field, value), ...) declared randomisation (v2)
    expert: str | None = None          # the scripted expert's skill: "pick" (default) | "push" (v2)
    reward: RewardSpec | None = None   # schema v2 dense reward block (None: the 0/1 success flag)
    success_dwell_s: float = 0.0       # s the verdict must hold without a break (0: one tick)
    fixtures: tuple = ()               # static boxes fixed to the world (Prop, mass unused) (v2)


# ---- the loader -----------------------------------------------------------------------------------
#
# Every check below raises CaliperError("<key path>: <what is wrong>"); parse_task prefixes the file,
# so a task error always reads "<file>: <key path>: <what>".

TASK_SUFFIX = ".caliper-task.json"
ZOO_DIR = Path(__file__).resolve().parent / "zoo"
ARM_ZOO_DIR = ZOO_DIR / "arms"           # the registry-arm tasks (schema v2, friction grasps)

_TOP_KEYS = ("version", "name", "robot", "q0", "scene", "gripper", "success", "successDwellS", "horizonS",
             "fps")
_TOP_KEYS_V2 = _TOP_KEYS + ("grasp", "randomization", "expert", "reward")
GRASPS = ("weld", "friction")
EXPERTS = ("pick", "push", "insert")
_RANDOM_OFFSETS = ("prop_xy", "prop_yaw")
_RANDOM_FACTORS = ("prop_mass", "prop_friction", "damping", "gain", "gravity")
RANDOM_FIELDS = _RANDOM_OFFSETS + _RANDOM_FACTORS    # the fields a task may declare (v2)
_SCENE_KEYS = ("ground", "props", "zones")
_SCENE_KEYS_V2 = _SCENE_KEYS + ("fixtures",)
_FIXTURE_KEYS = ("name", "kind", "halfExtents", "pos", "quat", "rgba", "material")
_PROP_KEYS = ("name", "kind", "halfExtents", "radius", "length", "pos", "quat", "mass", "rgba", "material")
_PROP_SIZE_KEYS = {"box": ("halfExtents",), "sphere": ("radius",), "cylinder": ("radius", "length")}
_MATERIAL_KEYS = ("solref", "solimp", "friction", "name")
_ZONE_KEYS = ("name", "center", "half", "rgba")
_GRIPPER_KEYS = ("joint", "closed")
_PREDICATE_KEYS = {
    "lifted": ("kind", "prop", "height", "ref", "held"),
    "placed_in_zone": ("kind", "prop", "zone", "settled_speed", "released", "pushed"),
    "reached": ("kind", "prop", "tolerance", "above"),
    "stacked": ("kind", "prop", "on", "tolerance", "xy", "settled_speed", "released"),
    "all_of": ("kind", "terms"),
    "any_of": ("kind", "terms"),
}
LIFTED_REFS = ("initial", "absolute")
GRIPPER_CLOSED = ("lo", "hi")


def _fail(path: str, msg: str):
    raise CaliperError(f"{path}: {msg}")


def _hint(word: str, options) -> str:
    """`` (did you mean 'x'?)`` for the closest option, compared case-insensitively."""
    lower = {str(o).lower(): o for o in options}
    close = difflib.get_close_matches(str(word).lower(), list(lower), n=1, cutoff=0.6)
    return f" (did you mean {lower[close[0]]!r}?)" if close else ""


def _join(path: str, key) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _obj(value, path: str, allowed, required=()) -> dict:
    """``value`` must be a JSON object with keys from ``allowed`` and every key of ``required``."""
    if not isinstance(value, dict):
        _fail(path, f"expected an object, got {_type(value)}")
    for key in value:
        if key not in allowed:
            _fail(_join(path, key), f"unknown key{_hint(key, allowed)}")
    for key in required:
        if key not in value:
            _fail(_join(path, key), "missing (required)")
    return value


def _type(value) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), f"the number {value!r}" if isinstance(value, (int, float)) else
                     type(value).__name__)


def _num(value, path: str) -> float:
    """A finite JSON number (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(path, f"expected a number, got {_type(value)}")
    if not math.isfinite(value):
        _fail(path, f"expected a finite number, got {value!r}")
    return float(value)


def _positive(value, path: str) -> float:
    out = _num(value, path)
    if out <= 0:
        _fail(path, f"must be > 0, got {out:g}")
    return out


def _vec(value, path: str, n: int | None = None) -> tuple:
    """A list of finite numbers (exactly ``n`` when given)."""
    if not isinstance(value, list):
        _fail(path, f"expected a list of {f'{n} ' if n else ''}numbers, got {_type(value)}")
    if n is not None and len(value) != n:
        _fail(path, f"expected {n} numbers, got {len(value)}")
    return tuple(_num(v, _join(path, i)) for i, v in enumerate(value))


def _str(value, path: str) -> str:
    if not isinstance(value, str) or not value:
        _fail(path, f"expected a non-empty string, got {_type(value) if value != '' else 'an empty one'}")
    return value


def _choice(value, path: str, options) -> str:
    if value not in options:
        _fail(path, f"{value!r} is not one of {', '.join(options)}{_hint(value, options)}")
    return value


def _list(value, path: str) -> list:
    if not isinstance(value, list):
        _fail(path, f"expected a list, got {_type(value)}")
    return value


def _unique(items, path: str, what: str) -> tuple:
    seen = set()
    for i, item in enumerate(items):
        if item.name in seen:
            _fail(_join(_join(path, i), "name"), f"duplicate {what} name {item.name!r}")
        seen.add(item.name)
    return tuple(items)


def _prop(d, path: str) -> Prop:
    """A scene prop: key checks here (with paths), construction by :meth:`Prop.from_dict`."""
    _obj(d, path, _PROP_KEYS, ("name", "kind"))
    name = _str(d["name"], _join(path, "name"))
    kind = _choice(d["kind"], _join(path, "kind"), tuple(_PROP_SIZE_KEYS))
    for key in ("halfExtents", "radius", "length"):
        if key in d and key not in _PROP_SIZE_KEYS[kind]:
            _fail(_join(path, key), f"not used by a {kind} (a {kind} takes "
                                    f"{' and '.join(_PROP_SIZE_KEYS[kind])})")
    for key in _PROP_SIZE_KEYS[kind]:
        if key not in d:
            _fail(_join(path, key), f"missing (a {kind} needs it)")
    checks = {"halfExtents": lambda v, p: _vec(v, p, 3), "radius": _positive, "length": _positive,
              "pos": lambda v, p: _vec(v, p, 3), "quat": lambda v, p: _vec(v, p, 4),
              "mass": _positive, "rgba": lambda v, p: _vec(v, p, 4)}
    for key, check in checks.items():
        if key in d:
            check(d[key], _join(path, key))
    if "halfExtents" in d and min(d["halfExtents"]) <= 0:
        _fail(_join(path, "halfExtents"), f"must all be > 0, got {d['halfExtents']}")
    if "quat" in d and not any(d["quat"]):
        _fail(_join(path, "quat"), "zero quaternion")
    material = d.get("material")
    if isinstance(material, dict):
        _obj(material, _join(path, "material"), _MATERIAL_KEYS, ("solref", "solimp", "friction"))
    elif material is not None and not isinstance(material, str):
        _fail(_join(path, "material"), f"expected a preset name or an object, got {_type(material)}")
    try:
        resolve_material(material)
    except CaliperError as exc:
        _fail(_join(path, "material"), str(exc))
    spec = {**d, "quat": _stable_quat(d["quat"])} if "quat" in d else d
    try:
        return Prop.from_dict(spec)
    except CaliperError as exc:
        _fail(path, f"prop {name!r}: {exc}")


def _fixture(d, path: str) -> Prop:
    """A static box fixed to the world: a prop's keys less the mass, ``kind`` "box" (or absent)."""
    _obj(d, path, _FIXTURE_KEYS, ("name", "halfExtents", "pos"))
    if d.get("kind", "box") != "box":
        _fail(_join(path, "kind"), f"{d['kind']!r}: a fixture is a box")
    return _prop({**d, "kind": "box"}, path)


def _stable_quat(quat) -> list:
    """A unit quaternion that Prop's normalisation (q / |q|) maps to itself, so that load -> write ->
    load is exact (normalising twice in floating point can move the last bit): a few normalisations,
    then one-ulp nudges of the components; the plain normalised one when neither settles."""
    def unit(q):
        return q / float(np.linalg.norm(q))

    q = np.asarray(quat, dtype=float)
    for _ in range(4):
        q = unit(q)
        if np.array_equal(unit(q), q):
            return q.tolist()
    for steps in itertools.product((0.0, math.inf, -math.inf), repeat=4):
        c = np.array([np.nextafter(v, s) if s else v for v, s in zip(q, steps, strict=True)])
        if np.array_equal(unit(c), c):
            return c.tolist()
    return q.tolist()


def _zone(d, path: str, name: str | None = None) -> Zone:
    """A zone object; ``name`` is the default for an inline zone given without one."""
    _obj(d, path, _ZONE_KEYS, ("center", "half") if name is not None else ("name", "center", "half"))
    zname = _str(d["name"], _join(path, "name")) if "name" in d else name
    half = _vec(d["half"], _join(path, "half"), 3)
    if min(half) <= 0:
        _fail(_join(path, "half"), f"must all be > 0, got {list(half)}")
    kw = {"rgba": _vec(d["rgba"], _join(path, "rgba"), 4)} if "rgba" in d else {}
    return Zone(zname, _vec(d["center"], _join(path, "center"), 3), half, **kw)


def predicate_from_dict(d, zones, path: str = "success", props=None) -> Predicate:
    """A success predicate from its JSON form. ``zones``: the scene's Zones (a string zone resolves
    by name against them); ``props``: the scene's prop names to check references against (None:
    unchecked), or {name: Prop} (a ``stacked`` term needs it: it reads the props' heights). Errors
    name the key path under ``path``."""
    by_name = {z.name: z for z in zones}
    return _predicate(d, path, by_name, props)


def _predicate(d, path: str, zones: dict, props) -> Predicate:
    if not isinstance(d, dict):
        _fail(path, f"expected a predicate object, got {_type(d)}")
    if "kind" not in d:
        _fail(_join(path, "kind"), f"missing (one of {', '.join(_PREDICATE_KEYS)})")
    kind = _choice(d["kind"], _join(path, "kind"), tuple(_PREDICATE_KEYS))
    required = {"lifted": ("prop", "height"), "placed_in_zone": ("prop", "zone"),
                "reached": ("prop", "tolerance"),
                "stacked": ("prop", "on", "tolerance", "xy")}.get(kind, ("terms",))
    _obj(d, path, _PREDICATE_KEYS[kind], required)
    if kind in ("all_of", "any_of"):
        terms = _list(d["terms"], _join(path, "terms"))
        if not terms:
            _fail(_join(path, "terms"), f"{kind} needs at least one term")
        out = tuple(_predicate(t, _join(_join(path, "terms"), i), zones, props) for i, t in enumerate(terms))
        for i, t in enumerate(out):
            if isinstance(t, Reached):
                _fail(_join(_join(_join(path, "terms"), i), "kind"),
                      "reached is a whole task's success (the top-level predicate), not a term")
        return AllOf(out) if kind == "all_of" else AnyOf(out)
    prop = _str(d["prop"], _join(path, "prop"))
    if props is not None and prop not in props:
        _fail(_join(path, "prop"), f"no prop {prop!r} in scene.props{_hint(prop, props)} "
                                   f"(props: {', '.join(props) or 'none'})")
    if kind == "lifted":
        ref = _choice(d.get("ref", "initial"), _join(path, "ref"), LIFTED_REFS)
        height = _num(d["height"], _join(path, "height"))
        if ref == "initial" and height <= 0:
            _fail(_join(path, "height"), f"must be > 0 for ref 'initial', got {height:g}")
        return Lifted(prop, height, ref, _bool(d.get("held", False), _join(path, "held")))
    if kind == "reached":
        tol = _num(d["tolerance"], _join(path, "tolerance"))
        if tol <= 0:
            _fail(_join(path, "tolerance"), f"must be > 0, got {tol:g}")
        above = _num(d.get("above", 0.0), _join(path, "above"))
        if above < 0:
            _fail(_join(path, "above"), f"must be >= 0, got {above:g}")
        return Reached(prop, tol, above)
    if kind == "stacked":
        return _stacked(d, path, prop, props)
    zpath = _join(path, "zone")
    if isinstance(d["zone"], str):
        if d["zone"] not in zones:
            _fail(zpath, f"no zone {d['zone']!r} in scene.zones{_hint(d['zone'], zones)} "
                         f"(zones: {', '.join(zones) or 'none'})")
        zone = zones[d["zone"]]
    elif isinstance(d["zone"], dict):
        zone = _zone(d["zone"], zpath, name=f"{prop}-zone")
    else:
        _fail(zpath, f"expected a zone name or a zone object, got {_type(d['zone'])}")
    released, pushed = _released(d, path), _bool(d.get("pushed", False), _join(path, "pushed"))
    if released and pushed:
        _fail(_join(path, "pushed"), "cannot be true together with released (a prop pushed into a zone "
                                     "was never carried; a released one was)")
    return PlacedInZone(prop, zone, _settled(d, path), released, pushed)


def _settled(d, path: str):
    speed = d.get("settled_speed")
    if speed is not None:
        speed = _num(speed, _join(path, "settled_speed"))
        if speed < 0:
            _fail(_join(path, "settled_speed"), f"must be >= 0, got {speed:g}")
    return speed


def _released(d, path: str) -> bool:
    return _bool(d.get("released", False), _join(path, "released"))


def _stacked(d, path: str, prop: str, props) -> Stacked:
    """A ``stacked`` term; ``props`` {name: Prop} gives the rise (the two vertical half extents)."""
    on = _str(d["on"], _join(path, "on"))
    if not isinstance(props, dict):
        _fail(path, "a stacked term needs the scene's props (their heights)")
    if on not in props:
        _fail(_join(path, "on"), f"no prop {on!r} in scene.props{_hint(on, props)} "
                                 f"(props: {', '.join(props) or 'none'})")
    if on == prop:
        _fail(_join(path, "on"), f"a prop cannot be stacked on itself ({prop!r})")
    tol = _positive(d["tolerance"], _join(path, "tolerance"))
    xy = _positive(d["xy"], _join(path, "xy"))
    rise = half_height(props[prop]) + half_height(props[on])
    return Stacked(prop, on, tol, xy, _settled(d, path), _released(d, path), rise)


def _bool(value, path: str) -> bool:
    if not isinstance(value, bool):
        _fail(path, f"expected true or false, got {_type(value)}")
    return value


def predicate_to_dict(p: Predicate, zones=()) -> dict:
    """The JSON form of a predicate: a zone equal to one of ``zones`` is written by name, any other
    zone inline."""
    if isinstance(p, (AllOf, AnyOf)):
        return {"kind": "all_of" if isinstance(p, AllOf) else "any_of",
                "terms": [predicate_to_dict(t, zones) for t in p.terms]}
    if isinstance(p, Lifted):
        out = {"kind": "lifted", "prop": p.prop, "height": p.height, "ref": p.ref}
        if p.held:
            out["held"] = True
        return out
    if isinstance(p, Reached):
        out = {"kind": "reached", "prop": p.prop, "tolerance": p.tolerance}
        if p.above:
            out["above"] = p.above
        return out
    if isinstance(p, Stacked):
        out = {"kind": "stacked", "prop": p.prop, "on": p.on, "tolerance": p.tolerance, "xy": p.xy}
        if p.settled_speed is not None:
            out["settled_speed"] = p.settled_speed
        if p.released:
            out["released"] = True
        return out
    if isinstance(p, PlacedInZone):
        zone = p.zone.name if p.zone in tuple(zones) else _zone_to_dict(p.zone)
        out = {"kind": "placed_in_zone", "prop": p.prop, "zone": zone}
        if p.settled_speed is not None:
            out["settled_speed"] = p.settled_speed
        if p.released:
            out["released"] = True
        if p.pushed:
            out["pushed"] = True
        return out
    raise CaliperError(f"not a success predicate: {p!r}")


def _zone_to_dict(z: Zone) -> dict:
    return {"name": z.name, "center": list(z.center), "half": list(z.half), "rgba": list(z.rgba)}


def _prop_to_dict(p: Prop) -> dict:
    out = {"name": p.name, "kind": p.kind}
    if p.kind == "box":
        out["halfExtents"] = list(p.size)
    else:
        out["radius"] = p.size[0]
        if p.kind == "cylinder":
            out["length"] = 2.0 * p.size[1]
    out.update(pos=list(p.pos), quat=list(p.quat), mass=p.mass, rgba=list(p.rgba))
    m = p.material
    if m is not None:
        preset = PRESETS.get(m.name)
        out["material"] = m.name if preset == m else {
            **({"name": m.name} if m.name != "custom" else {}),
            "solref": list(m.solref), "solimp": list(m.solimp), "friction": list(m.friction)}
    return out


def _robot(value, base_dir: Path, version: int = 1) -> tuple[Path, str | None]:
    """(robot file, registry name or None): a path relative to the task file, or (version 2) a
    registry name."""
    rel = _str(value, "robot")
    path = Path(rel) if Path(rel).is_absolute() else Path(base_dir) / rel
    if path.is_file():
        return path.resolve(), None
    if version >= 2 and Path(rel).name == rel and not rel.endswith((".urdf", ".xml", ".xacro")):
        import robots

        try:
            return robots.resolve(rel).resolve(), robots.canonical(rel)
        except CaliperError as exc:
            _fail("robot", str(exc))
    _fail("robot", f"{rel!r} not found (looked for {path.resolve()})")


def _randomization(d, path: str = "randomization") -> tuple:
    """The declared randomisation: ((field, value), ...) in field order, checked."""
    _obj(d, path, _RANDOM_OFFSETS + _RANDOM_FACTORS)
    out = []
    for key in _RANDOM_OFFSETS + _RANDOM_FACTORS:
        if key not in d:
            continue
        value, kpath = d[key], _join(path, key)
        if value is None:
            out.append((key, None))
        elif key in _RANDOM_OFFSETS:
            a = _num(value, kpath)
            if a < 0:
                _fail(kpath, f"a half-width must be >= 0, got {a:g}")
            out.append((key, a))
        else:
            lo, hi = _vec(value, kpath, 2)
            if not 0 < lo <= hi:
                _fail(kpath, f"need 0 < lo <= hi, got [{lo:g}, {hi:g}]")
            out.append((key, (lo, hi)))
    return tuple(out)


def _int(value, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        _fail(path, f"expected a positive integer, got {_type(value)}")
    return value


def _parse(data, base_dir: Path, source: Path | None) -> Task:
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(data, dict) and "version" in data:
        if isinstance(version, bool) or not isinstance(version, int):
            _fail("version", f"expected the integer 1 or 2, got {_type(version)}")
        if version not in SCHEMA_VERSIONS:
            _fail("version", f"unsupported schema version {version} (this reader knows "
                             f"{', '.join(map(str, SCHEMA_VERSIONS))})")
        for key in _TOP_KEYS_V2[len(_TOP_KEYS):]:
            if version < 2 and key in data:
                _fail(key, f"needs \"version\": 2 (this file says version {version})")
    _obj(data, "", _TOP_KEYS_V2 if version == 2 else _TOP_KEYS, ("version", "name", "robot", "scene"))
    name = _str(data["name"], "name")
    robot, robot_name = _robot(data["robot"], base_dir, version)
    q0 = _vec(data["q0"], "q0") if data.get("q0") is not None else None
    scene = _obj(data["scene"], "scene", _SCENE_KEYS_V2 if version == 2 else _SCENE_KEYS)
    ground = scene.get("ground", 0.0)
    ground = None if ground is None else _num(ground, "scene.ground")
    props = _unique([_prop(p, f"scene.props[{i}]") for i, p in
                     enumerate(_list(scene.get("props", []), "scene.props"))], "scene.props", "prop")
    fixtures = _unique([_fixture(f, f"scene.fixtures[{i}]") for i, f in
                        enumerate(_list(scene.get("fixtures", []), "scene.fixtures"))],
                       "scene.fixtures", "fixture")
    for i, f in enumerate(fixtures):
        if f.name in {p.name for p in props}:
            _fail(f"scene.fixtures[{i}].name", f"{f.name!r} is also a prop's name")
    zones = _unique([_zone(z, f"scene.zones[{i}]") for i, z in
                     enumerate(_list(scene.get("zones", []), "scene.zones"))], "scene.zones", "zone")
    gripper = None
    if data.get("gripper") is not None:
        g = _obj(data["gripper"], "gripper", _GRIPPER_KEYS)
        joint = _str(g["joint"], "gripper.joint") if g.get("joint") is not None else None
        gripper = GripperSpec(joint, _choice(g.get("closed", "lo"), "gripper.closed", GRIPPER_CLOSED))
    success = None
    if data.get("success") is not None:
        success = _predicate(data["success"], "success", {z.name: z for z in zones},
                             {p.name: p for p in props})
    horizon = _positive(data["horizonS"], "horizonS") if data.get("horizonS") is not None else None
    fps = _int(data["fps"], "fps") if data.get("fps") is not None else None
    grasp = _choice(data["grasp"], "grasp", GRASPS) if data.get("grasp") is not None else None
    randomization = _randomization(data["randomization"]) if data.get("randomization") is not None else None
    expert = _choice(data["expert"], "expert", EXPERTS) if data.get("expert") is not None else None
    reward = None
    if data.get("reward") is not None:
        reward = parse_reward(data["reward"], [p.name for p in props], [z.name for z in zones], _fail, _num,
                              _obj, _hint)
    dwell = data.get("successDwellS")
    dwell = 0.0 if dwell is None else _num(dwell, "successDwellS")
    if dwell < 0:
        _fail("successDwellS", f"must be >= 0, got {dwell:g}")
    return Task(name, robot, q0, ground, props, zones, gripper, success, horizon, fps, source, version,
                robot_name, grasp, randomization, expert, reward, success_dwell_s=dwell, fixtures=fixtures)


def parse_task(data: dict, base_dir: Path | None = None, source: str | Path | None = None) -> Task:
    """A Task from its parsed JSON. ``base_dir``: the folder a relative robot path resolves
    against (default: the source file's folder, else the working directory); ``source``: the file it
    came from (stored resolved in ``Task.source``; error messages start with it as given)."""
    src = Path(source).resolve() if source is not None else None
    base = Path(base_dir) if base_dir is not None else (src.parent if src is not None else Path.cwd())
    try:
        return _parse(data, base, src)
    except CaliperError as exc:
        raise CaliperError(f"{source if source is not None else '<task>'}: {exc}") from None


def _no_duplicates(pairs) -> dict:
    """json object hook: a key given twice in one object is an error (the last would silently win)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise CaliperError(f"{key}: key given twice in one object")
        out[key] = value
    return out


def load_task(path) -> Task:
    """Read and check a ``*.caliper-task.json`` file (a file path; see :func:`find_task` for zoo
    names). Any problem is one CaliperError: ``<file>: <key path>: <what>``."""
    path = Path(path)
    text = read_text(path, "task file")
    check_depth(text, str(path))
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise CaliperError(f"{path}: not valid JSON: {exc.msg} ({where})") from None
    except CaliperError as exc:
        raise CaliperError(f"{path}: {exc}") from None
    return parse_task(data, path.resolve().parent, path)


def task_to_dict(task: Task) -> dict:
    """The JSON form of ``task`` (``parse_task`` of it gives an equal Task). The robot is written
    relative to the task's source folder when there is one (absolute otherwise); zones inside the
    success predicate are written by name when they are scene zones."""
    robot = str(task.robot)
    if task.source is not None:
        try:
            robot = Path(os.path.relpath(task.robot, task.source.parent)).as_posix()
        except ValueError:          # another drive (Windows)
            pass
    if task.robot_name is not None:
        robot = task.robot_name
    out = {"version": 2 if task.reward is not None else task.version, "name": task.name, "robot": robot}
    if task.q0 is not None:
        out["q0"] = list(task.q0)
    out["scene"] = {"ground": task.ground, "props": [_prop_to_dict(p) for p in task.props],
                    "zones": [_zone_to_dict(z) for z in task.zones]}
    if task.fixtures:
        out["scene"]["fixtures"] = [{k: v for k, v in _prop_to_dict(f).items() if k != "mass"}
                                    for f in task.fixtures]
    if task.gripper is not None:
        out["gripper"] = {"closed": task.gripper.closed}
        if task.gripper.joint is not None:
            out["gripper"] = {"joint": task.gripper.joint, **out["gripper"]}
    if task.success is not None:
        out["success"] = predicate_to_dict(task.success, task.zones)
    if task.success_dwell_s:
        out["successDwellS"] = task.success_dwell_s
    if task.horizon_s is not None:
        out["horizonS"] = task.horizon_s
    if task.fps is not None:
        out["fps"] = task.fps
    if task.grasp is not None:
        out["grasp"] = task.grasp
    if task.randomization is not None:
        out["randomization"] = {k: list(v) if isinstance(v, tuple) else v for k, v in task.randomization}
    if task.expert is not None:
        out["expert"] = task.expert
    if task.reward is not None:
        out["reward"] = reward_to_dict(task.reward)
    return out


# ---- the zoo --------------------------------------------------------------------------------------

def zoo_files(arms: bool = False) -> list[Path]:
    """The seed zoo's task files (``gripper_arm``), in file-name order; ``arms``: then the registry
    arms' tasks (``zoo/arms/``)."""
    out = sorted(ZOO_DIR.glob(f"*{TASK_SUFFIX}"))
    return out + sorted(ARM_ZOO_DIR.glob(f"*{TASK_SUFFIX}")) if arms else out


def _zoo_index(arms: bool = True) -> dict[str, Path]:
    out = {}
    for f in zoo_files(arms):
        try:
            name = json.loads(read_text(f, "task file")).get("name")
        except (json.JSONDecodeError, AttributeError):
            name = None
        if isinstance(name, str):
            out.setdefault(name, f)
    return out


def zoo_names(arms: bool = False) -> list[str]:
    """The zoo task names, in file order (``arms``: the registry arms' tasks too)."""
    return list(_zoo_index(arms))


def find_task(name_or_path) -> Path:
    """A zoo task name (``"lift-cube"``) or a task file path -> the task file."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    index = _zoo_index()
    key = str(name_or_path)
    if key in index:
        return index[key]
    folded = [name for name in index if name.lower() == key.lower()]
    if len(folded) == 1:            # LIFT-CUBE is lift-cube (like command names)
        return index[folded[0]]
    if path.suffix == ".json" or len(path.parts) > 1:
        raise NotFoundError(f"{key}: no such task file")
    raise NotFoundError(f"unknown task {key!r}: not a file and not a zoo task{_hint(key, index)} "
                        f"(zoo: {', '.join(index)})")
