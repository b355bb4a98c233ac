"""Dense reward terms of a task (schema v2 ``"reward"`` block): one registry, both engines.

A task's reward per world and control tick is ``success * fired + sum_k weight_k * value_k`` where
``fired`` is the tick the success predicate first holds (the 0/1 reward of a v1 task) and each
term's value comes from its kind:

- ``reach``       1 - tanh(|gripper point - goal| / scale); goal: the prop centre raised by the
                  optional ``above`` (m, default 0; a reaching task's hover point)
- ``grasp``       1 while the prop is held (the env's grasp weld holds it)
- ``lift``        clip((prop z - its episode-start z) / height, 0, 1)
- ``to_zone``     1 - tanh(|prop centre - zone centre| / scale)
- ``action_rate`` -|a_t - a_{t-1}|^2 over the gated joint targets (a_{-1}: the start pose)

The gripper point is the centre of the jaw's collision box (:func:`tasks.env_spec.jaw_box`) in the
world frame. Every kind is one entry of :data:`KINDS`: a function ``fn(term, ctx, xp) -> (...)``
over the array module ``xp`` (``numpy`` on the CPU engine, ``jax.numpy`` inside the MJX engine's
jitted step), so the NumPy twin and the JAX twin are the same formulas; a new kind is one entry
(its fields in :data:`KIND_FIELDS`, its function in :data:`KINDS`).

``ctx`` (:class:`RewardContext`) holds, per world (leading ``...`` axes): ``grip`` (..., 3),
``pos`` / ``pos0`` (..., P, 3), ``held`` (...,) int (-1: none), ``target`` / ``prev_target``
(..., nq) gated joint targets, ``zones`` {name: (3,) centre}, ``props`` {name: index}.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from caliper_jax.errors import CaliperError


@dataclass(frozen=True)
class RewardTerm:
    """One dense term: ``weight * value`` of kind ``kind`` (``params`` its kind's fields)."""

    name: str
    kind: str
    weight: float
    prop: str | None = None
    zone: str | None = None
    scale: float | None = None
    height: float | None = None
    above: float | None = None


@dataclass(frozen=True)
class RewardSpec:
    """The ``"reward"`` block: weight of the sparse success flag and the dense terms."""

    success: float = 1.0
    terms: tuple = ()

    @property
    def active(self) -> tuple:
        """The terms with a nonzero weight (zero-weight terms cost nothing)."""
        return tuple(t for t in self.terms if t.weight != 0.0)


class RewardContext(NamedTuple):
    grip: Any
    pos: Any
    pos0: Any
    held: Any
    target: Any
    prev_target: Any
    zones: dict
    props: dict


def _dist(xp, a, b):
    return xp.sqrt(xp.sum(xp.square(a - b), axis=-1))


def _reach(t, c, xp):
    i = c.props[t.prop]
    goal = c.pos[..., i, :]
    if t.above:
        goal = goal + xp.asarray([0.0, 0.0, t.above], dtype=goal.dtype)
    return 1.0 - xp.tanh(_dist(xp, c.grip, goal) / t.scale)


def _grasp(t, c, xp):
    return (c.held == c.props[t.prop]).astype(c.pos.dtype)


def _lift(t, c, xp):
    i = c.props[t.prop]
    return xp.clip((c.pos[..., i, 2] - c.pos0[..., i, 2]) / t.height, 0.0, 1.0)


def _to_zone(t, c, xp):
    i = c.props[t.prop]
    centre = xp.asarray(c.zones[t.zone], dtype=c.pos.dtype)
    return 1.0 - xp.tanh(_dist(xp, c.pos[..., i, :], centre) / t.scale)


def _action_rate(t, c, xp):
    return -xp.sum(xp.square(c.target - c.prev_target), axis=-1)


#: kind -> fn(term, ctx, xp) -> (...) value (unweighted).
KINDS = {"reach": _reach, "grasp": _grasp, "lift": _lift, "to_zone": _to_zone, "action_rate": _action_rate}
#: kind -> (required fields, optional fields) besides name, kind, weight.
KIND_FIELDS = {"reach": (("prop", "scale"), ("above",)), "grasp": (("prop",), ()),
               "lift": (("prop", "height"), ()), "to_zone": (("prop", "zone", "scale"), ()),
               "action_rate": ((), ())}


def grip_point(layout, xp, jaw_pos, jaw_rot):
    """(..., 3) world position of the jaw box centre: jaw_pos (..., 3), jaw_rot (..., 3, 3)."""
    centre = xp.asarray(layout.jaw_center, dtype=jaw_pos.dtype)
    return jaw_pos + xp.einsum("...ij,j->...i", jaw_rot, centre)


def context(task, layout, xp, *, jaw_pos, jaw_rot, pos, pos0, held, target, prev_target) -> RewardContext:
    """The :class:`RewardContext` of a state (see the module docstring for shapes)."""
    return RewardContext(grip_point(layout, xp, jaw_pos, jaw_rot), pos, pos0, held, target, prev_target,
                         {z.name: np.asarray(z.center, np.float64) for z in task.zones},
                         {p: i for i, p in enumerate(layout.prop_names)})


def terms(spec: RewardSpec | None, ctx: RewardContext, xp) -> dict:
    """{term name: (...) weighted value} of every active term (an empty dict without a spec)."""
    if spec is None:
        return {}
    return {t.name: (t.weight * KINDS[t.kind](t, ctx, xp)).astype(xp.float32) for t in spec.active}


def total(spec: RewardSpec | None, fired, values: dict, xp):
    """(...) float32 reward: success weight * fired + the sum of the weighted terms."""
    w = 1.0 if spec is None else spec.success
    out = w * fired.astype(xp.float32)
    for v in values.values():
        out = out + v
    return out.astype(xp.float32)


def check_finite(values: dict, where: str = "") -> None:
    """Raise a CaliperError naming the first reward term with a non-finite value (NumPy arrays,
    any shape; ``where`` adds context such as the world index)."""
    for name, v in values.items():
        v = np.asarray(v)
        bad = np.flatnonzero(~np.isfinite(v.reshape(-1)))
        if len(bad):
            idx = np.unravel_index(int(bad[0]), v.shape) if v.ndim else ()
            raise CaliperError(f"reward term {name!r}: non-finite value {float(v.reshape(-1)[bad[0]])!r} "
                               f"at {tuple(int(i) for i in idx)}{where} (a NaN reward trains a NaN policy)")


# ---- the JSON block (tasks.schema calls these; errors are "<key path>: <what>") --------------------

_TERM_KEYS = ("name", "kind", "weight", "prop", "zone", "scale", "height", "above")


def parse_reward(d, props, zones, fail, num, obj, hint) -> RewardSpec:
    """The ``"reward"`` block from JSON. ``props`` / ``zones``: the scene's names; ``fail`` /
    ``num`` / ``obj`` / ``hint``: the schema's error helpers (so errors read like every other
    field's)."""
    obj(d, "reward", ("success", "terms"))
    success = num(d["success"], "reward.success") if "success" in d else 1.0
    raw = d.get("terms", [])
    if not isinstance(raw, list):
        fail("reward.terms", f"expected a list, got {type(raw).__name__}")
    out, seen = [], set()
    for i, t in enumerate(raw):
        path = f"reward.terms[{i}]"
        obj(t, path, _TERM_KEYS, ("name", "kind"))
        name = t["name"]
        if not isinstance(name, str) or not name:
            fail(f"{path}.name", "expected a non-empty string")
        if name in seen:
            fail(f"{path}.name", f"duplicate term name {name!r}")
        seen.add(name)
        kind = t["kind"]
        if kind not in KINDS:
            fail(f"{path}.kind", f"{kind!r} is not one of {', '.join(KINDS)}{hint(kind, KINDS)}")
        required, optional = KIND_FIELDS[kind]
        for key in ("prop", "zone", "scale", "height", "above"):
            if key in t and key not in required + optional:
                fail(f"{path}.{key}", f"not used by a {kind} term")
        for key in required:
            if key not in t:
                fail(f"{path}.{key}", f"missing (a {kind} term needs it)")
        weight = num(t["weight"], f"{path}.weight") if "weight" in t else 1.0
        kw = {}
        if "prop" in t:
            if t["prop"] not in props:
                fail(f"{path}.prop", f"no prop {t['prop']!r} in scene.props{hint(t['prop'], props)} "
                                     f"(props: {', '.join(props) or 'none'})")
            kw["prop"] = t["prop"]
        if "zone" in t:
            if t["zone"] not in zones:
                fail(f"{path}.zone", f"no zone {t['zone']!r} in scene.zones{hint(t['zone'], zones)} "
                                     f"(zones: {', '.join(zones) or 'none'})")
            kw["zone"] = t["zone"]
        for key in ("scale", "height"):
            if key in t:
                v = num(t[key], f"{path}.{key}")
                if v <= 0:
                    fail(f"{path}.{key}", f"must be > 0, got {v:g}")
                kw[key] = v
        if "above" in t:
            v = num(t["above"], f"{path}.above")
            if v < 0:
                fail(f"{path}.above", f"must be >= 0, got {v:g}")
            kw["above"] = v
        out.append(RewardTerm(name, kind, weight, **kw))
    return RewardSpec(success, tuple(out))


def reward_to_dict(spec: RewardSpec) -> dict:
    """The JSON form of a :class:`RewardSpec` (``parse_reward`` of it gives an equal spec)."""
    terms_ = []
    for t in spec.terms:
        d = {"name": t.name, "kind": t.kind, "weight": t.weight}
        for key in ("prop", "zone", "scale", "height", "above"):
            if getattr(t, key) is not None:
                d[key] = getattr(t, key)
        terms_.append(d)
    return {"success": spec.success, "terms": terms_}


__all__ = ["KINDS", "KIND_FIELDS", "RewardContext", "RewardSpec", "RewardTerm", "check_finite", "context",
           "grip_point", "parse_reward", "reward_to_dict", "terms", "total"]
