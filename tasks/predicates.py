"""Success predicates, evaluated: one evaluator written once over an array module, two twins.

State convention (world frame, metres and m/s, props in ``task.props`` order):

- ``pos``  ``(..., P, 3)``: prop centre positions now;
- ``pos0`` ``(..., P, 3)``: prop centre positions at the start of the episode;
- ``vel``  ``(..., P, 3)``: prop linear velocities, or None (then a settled check raises);
- ``held`` ``(..., P)`` bool: the prop is in the gripper now (the environments: its grasp weld is
  on), or None (then a ``lifted`` with ``held`` or a ``placed_in_zone`` with ``released`` or
  ``pushed`` raises);
- ``carried`` ``(..., P)`` bool: the prop has been picked up this episode: it was in the gripper
  for CARRY_S without a break, and at some tick in the gripper its centre was at least CARRY_RISE
  above its start height (:func:`carry_update`, latched), or None (as ``held``). A prop dragged
  along the ground, or taken and dropped again at once, is not carried;
- ``grip`` ``(..., 3)``: the gripper point (:func:`tasks.rewards.grip_point`, the jaw box centre),
  or None (then a ``reached`` raises).

A ``lifted`` with ``held`` also needs ``held[..., i]``; a ``placed_in_zone`` with ``released``
also needs ``carried[..., i] & ~held[..., i]``: a prop pushed, knocked or dropped into a zone
without ever being carried is not placed, nor is one still in the gripper. A ``placed_in_zone``
with ``pushed`` also needs ``~carried[..., i]``: a prop lifted and carried at any time this episode
was not pushed into its zone (a push may still touch it with the closed gripper).

The verdict is instantaneous. The task's ``success_dwell_s`` makes a success need the verdict on
:func:`dwell_ticks` consecutive control ticks (:func:`streak`, written once over the array module
for both engines).

Leading ``...`` dimensions are batch dimensions; a verdict has shape ``(...)``. Comparisons are
plain ``>=`` / ``<=`` in the dtype of ``pos`` (zone faces inclusive, speed = Euclidean norm of the
linear velocity), so the NumPy twin (:func:`evaluate_np`) and the JAX twin (:func:`evaluator`) agree
exactly on the same inputs. Every term of ``all_of`` / ``any_of`` is evaluated. A settled check on a
state without velocities raises rather than passing a fly-through.

NumPy-only at import time; JAX is imported inside :func:`evaluator`.
"""
from __future__ import annotations

import dataclasses
import math
from functools import reduce

import numpy as np

from caliper_jax.errors import CaliperError
from tasks.schema import AllOf, AnyOf, Lifted, PlacedInZone, Predicate, Reached, Stacked, Zone


def _index(prop: str, prop_names) -> int:
    names = list(prop_names)
    if prop not in names:
        raise CaliperError(f"success predicate: unknown prop {prop!r} (props: {', '.join(names) or 'none'})")
    return names.index(prop)


def needs_velocity(pred: Predicate) -> bool:
    """True when some term is a settled check (``placed_in_zone`` or ``stacked`` with ``settled_speed``)."""
    if isinstance(pred, (AllOf, AnyOf)):
        return any(needs_velocity(t) for t in pred.terms)
    return isinstance(pred, (PlacedInZone, Stacked)) and pred.settled_speed is not None


def needs_grip(pred: Predicate) -> bool:
    """True when the verdict reads the gripper point (a ``reached`` predicate)."""
    if isinstance(pred, (AllOf, AnyOf)):
        return any(needs_grip(t) for t in pred.terms)
    return isinstance(pred, Reached)


def needs_grasp(pred: Predicate) -> bool:
    """True when some term judges the grasp (``lifted`` with ``held``, ``placed_in_zone`` or
    ``stacked`` with ``released``, ``placed_in_zone`` with ``pushed``): the state must then carry
    ``held`` and ``carried``."""
    if isinstance(pred, (AllOf, AnyOf)):
        return any(needs_grasp(t) for t in pred.terms)
    return bool(getattr(pred, "held", False) or getattr(pred, "released", False)
                or getattr(pred, "pushed", False))


def geometric(pred: Predicate) -> Predicate:
    """``pred`` without its grasp conditions (``held`` / ``released`` / ``pushed`` off): the pose part
    only, for a search over carry poses that decides the grasp afterwards (:mod:`tasks.witness`)."""
    if isinstance(pred, (AllOf, AnyOf)):
        return type(pred)(tuple(geometric(t) for t in pred.terms))
    if isinstance(pred, Lifted):
        return dataclasses.replace(pred, held=False)
    if isinstance(pred, PlacedInZone):
        return dataclasses.replace(pred, released=False, pushed=False)
    if isinstance(pred, Stacked):
        return dataclasses.replace(pred, released=False)
    return pred


def released_props(pred: Predicate) -> list[str]:
    """The props some ``placed_in_zone`` or ``stacked`` term wants released (a stack: the carried
    prop), in predicate order, each once."""
    return list(dict.fromkeys(leaf.prop for leaf in _leaves(pred)
                              if isinstance(leaf, (PlacedInZone, Stacked)) and leaf.released))


def _settled_error(pred) -> CaliperError:
    where = f"on {pred.on!r}" if isinstance(pred, Stacked) else f"in {pred.zone.name!r}"
    kind = "stacked" if isinstance(pred, Stacked) else "placed_in_zone"
    return CaliperError(f"{kind} {pred.prop!r} {where}: settled_speed needs velocities, and this state "
                        "has none")


def _speed(xp, v):
    """(...,) Euclidean norm of (..., 3) velocities, written out (the same operations in both twins)."""
    return xp.sqrt(v[..., 0] * v[..., 0] + v[..., 1] * v[..., 1] + v[..., 2] * v[..., 2])


def _grasp_error(pred) -> CaliperError:
    what = "held" if isinstance(pred, Lifted) else "pushed" if getattr(pred, "pushed", False) else "released"
    kind = {Lifted: "lifted", Stacked: "stacked"}.get(type(pred), "placed_in_zone")
    return CaliperError(f"{kind} {pred.prop!r}: {what} needs the grasp state (held, carried), and this "
                        "state has none")


def _build(pred: Predicate, prop_names, xp):
    """``fn(pos, pos0, vel, held, carried, grip) -> bool (...)`` over the array module ``xp`` (numpy
    or jax.numpy). Prop names resolve here, once; the inputs' dtype sets the comparison precision."""
    if isinstance(pred, (AllOf, AnyOf)):
        terms = [_build(t, prop_names, xp) for t in pred.terms]
        op, unit = (xp.logical_and, True) if isinstance(pred, AllOf) else (xp.logical_or, False)

        def combine(pos, pos0, vel, held, carried, grip):
            start = xp.full(pos.shape[:-2], unit)
            return reduce(op, (term(pos, pos0, vel, held, carried, grip) for term in terms), start)
        return combine
    if isinstance(pred, Lifted):
        i = _index(pred.prop, prop_names)
        if pred.ref not in ("initial", "absolute"):
            raise CaliperError(f"lifted {pred.prop!r}: ref {pred.ref!r} is not one of initial, absolute")

        def lifted(pos, pos0, vel, held, carried, grip):
            z = pos[..., i, 2]
            rise = z - pos0[..., i, 2] if pred.ref == "initial" else z
            up = rise >= xp.asarray(pred.height, dtype=pos.dtype)
            if not pred.held:
                return up
            if held is None:
                raise _grasp_error(pred)
            return up & held[..., i]
        return lifted
    if isinstance(pred, PlacedInZone):
        i = _index(pred.prop, prop_names)
        lo = [c - h for c, h in zip(pred.zone.center, pred.zone.half, strict=True)]
        hi = [c + h for c, h in zip(pred.zone.center, pred.zone.half, strict=True)]

        def placed(pos, pos0, vel, held, carried, grip):
            p = pos[..., i, :]
            ok = xp.all((p >= xp.asarray(lo, dtype=pos.dtype)) & (p <= xp.asarray(hi, dtype=pos.dtype)),
                        axis=-1)
            if pred.settled_speed is not None:
                if vel is None:
                    raise _settled_error(pred)
                ok = ok & (_speed(xp, vel[..., i, :]) <= xp.asarray(pred.settled_speed, dtype=vel.dtype))
            if pred.released:
                if held is None or carried is None:
                    raise _grasp_error(pred)
                ok = ok & carried[..., i] & ~held[..., i]
            if pred.pushed:
                if held is None or carried is None:
                    raise _grasp_error(pred)
                ok = ok & ~carried[..., i]
            return ok
        return placed
    if isinstance(pred, Stacked):
        return _build_stacked(pred, prop_names, xp)
    if isinstance(pred, Reached):
        i = _index(pred.prop, prop_names)

        def reached(pos, pos0, vel, held, carried, grip):
            if grip is None:
                raise CaliperError(f"reached {pred.prop!r}: needs the gripper point, and this state has none")
            d = grip - pos[..., i, :] - xp.asarray([0.0, 0.0, pred.above], dtype=pos.dtype)
            dist2 = d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2]
            return dist2 <= xp.asarray(pred.tolerance * pred.tolerance, dtype=pos.dtype)
        return reached
    raise CaliperError(f"not a success predicate: {pred!r}")


def _build_stacked(pred: Stacked, prop_names, xp):
    """A stack's verdict: |z_A - z_B - rise| <= tolerance, horizontal centre distance <= xy, both
    settled (when asked), A carried and neither prop held (when released)."""
    i, j = _index(pred.prop, prop_names), _index(pred.on, prop_names)

    def stacked(pos, pos0, vel, held, carried, grip):
        a, b = pos[..., i, :], pos[..., j, :]
        gap = a[..., 2] - b[..., 2] - xp.asarray(pred.rise, dtype=pos.dtype)
        ok = xp.abs(gap) <= xp.asarray(pred.tolerance, dtype=pos.dtype)
        dx, dy = a[..., 0] - b[..., 0], a[..., 1] - b[..., 1]
        ok = ok & (dx * dx + dy * dy <= xp.asarray(pred.xy * pred.xy, dtype=pos.dtype))
        if pred.settled_speed is not None:
            if vel is None:
                raise _settled_error(pred)
            limit = xp.asarray(pred.settled_speed, dtype=vel.dtype)
            ok = ok & (_speed(xp, vel[..., i, :]) <= limit) & (_speed(xp, vel[..., j, :]) <= limit)
        if pred.released:
            if held is None or carried is None:
                raise _grasp_error(pred)
            ok = ok & carried[..., i] & ~held[..., i] & ~held[..., j]
        return ok
    return stacked


def _floats(x, xp):
    """``x`` as a floating array: a float32/float64 array keeps its dtype, anything else becomes the
    module's default float (NumPy: float64)."""
    a = xp.asarray(x)
    return a if xp.issubdtype(a.dtype, xp.floating) else xp.asarray(x, dtype=float)


def _bools(x, xp):
    return None if x is None else xp.asarray(x, dtype=bool)


def evaluator_np(pred: Predicate, prop_names):
    """The NumPy twin, built once: ``fn(pos, pos0, vel=None, held=None, carried=None, grip=None)
    -> bool array (...)`` (for a host loop that evaluates every tick; :func:`evaluate_np` builds it
    per call)."""
    fn = _build(pred, prop_names, np)

    def evaluate(pos, pos0, vel=None, held=None, carried=None, grip=None):
        pos = _floats(pos, np)
        grip = None if grip is None else np.asarray(grip, pos.dtype)
        return fn(pos, _floats(pos0, np), None if vel is None else _floats(vel, np),
                  _bools(held, np), _bools(carried, np), grip)
    return evaluate


def evaluate_np(pred: Predicate, prop_names, pos, pos0, vel=None, held=None, carried=None, grip=None):
    """The NumPy twin: the verdict for one state (a bool), or a bool array over leading batch
    dimensions. Lists become float64; float32 arrays compare in float32 (as the JAX twin does)."""
    out = evaluator_np(pred, prop_names)(pos, pos0, vel, held, carried, grip)
    return bool(out) if np.ndim(out) == 0 else np.asarray(out, dtype=bool)


def evaluator(pred: Predicate, prop_names):
    """The JAX twin: a pure ``fn(pos, pos0, vel, held, carried, grip) -> bool array (...)`` in
    ``jax.numpy`` (no jit inside; jit and vmap it as you like). ``vel`` may be None only when no
    term is a settled check, ``held`` / ``carried`` only when no term judges the grasp, ``grip``
    only when none is a ``reached``: otherwise the call raises while tracing."""
    import jax.numpy as jnp

    fn = _build(pred, prop_names, jnp)

    def evaluate(pos, pos0, vel=None, held=None, carried=None, grip=None):
        pos = _floats(pos, jnp)
        grip = None if grip is None else jnp.asarray(grip, pos.dtype)
        return fn(pos, _floats(pos0, jnp), None if vel is None else _floats(vel, jnp),
                  _bools(held, jnp), _bools(carried, jnp), grip)
    return evaluate


def latch(prev, now):
    """Success latches within an episode: once true, true for the rest of it."""
    return prev | now


CARRY_RISE = 0.01      # m a held prop's centre must rise above its start height to count as carried
CARRY_S = 1.5          # s a prop must stay in the gripper without a break to count as carried


def carry_ticks(fps: float) -> int:
    """CARRY_S in control ticks at ``fps``, rounded up."""
    return max(1, math.ceil(CARRY_S * fps - 1e-9))


def carry_start(xp, shape):
    """The carry state of a new episode for props of leading shape ``shape`` (..., P): (risen bool,
    held run int32, held long enough bool), all off."""
    return (xp.zeros(shape, bool), xp.zeros(shape, xp.int32), xp.zeros(shape, bool))


def carry_update(xp, carry, held, pos, pos0, need: int):
    """One tick of the carry state (:func:`carry_start`) with ``held`` (..., P) bool and prop centres
    ``pos`` / start centres ``pos0`` (..., P, 3) -> (new carry state, carried (..., P) bool):
    carried = held for ``need`` ticks without a break at some time, and lifted CARRY_RISE while held
    at some time (both latched within the episode)."""
    risen, run, long = carry
    rise = pos[..., 2] - pos0[..., 2]
    risen = risen | (held & (rise >= xp.asarray(CARRY_RISE, dtype=rise.dtype)))
    run = xp.where(held, run + 1, 0).astype(run.dtype)
    long = long | (run >= need)
    return (risen, run, long), risen & long


def held_mask(xp, held, nprop: int):
    """(..., P) bool from the environments' held prop index ``held`` (...,) int (-1: none)."""
    return xp.asarray(held)[..., None] == xp.arange(nprop)


def dwell_ticks(task, fps: int) -> int:
    """Consecutive control ticks the verdict must hold for a success: ``task.success_dwell_s`` at
    ``fps``, rounded up, at least 1 (a dwell of 0 keeps the first true tick)."""
    dwell = float(getattr(task, "success_dwell_s", 0.0) or 0.0)
    return max(1, math.ceil(dwell * fps - 1e-9))


def streak(xp, prev, now):
    """Consecutive ticks the verdict has held, ending now: ``prev + 1`` where ``now``, else 0."""
    return xp.where(now, prev + 1, 0).astype(prev.dtype)


# ---- reading a predicate ---------------------------------------------------------------------------

def _fmt(values) -> str:
    return "(" + ", ".join(f"{v:g}" for v in values) + ")"


def describe(pred: Predicate) -> str:
    """A plain-English one-liner."""
    if isinstance(pred, (AllOf, AnyOf)):
        word = "all of" if isinstance(pred, AllOf) else "any of"
        return f"{word}: " + "; ".join(f"({describe(t)})" for t in pred.terms)
    if isinstance(pred, Lifted):
        held = " in the gripper" if pred.held else ""
        if pred.ref == "initial":
            return f"{pred.prop} lifted at least {pred.height:g} m above its start height{held}"
        return f"{pred.prop} centre at height >= {pred.height:g} m{held}"
    if isinstance(pred, PlacedInZone):
        z = pred.zone
        text = f"{pred.prop} centre inside zone {z.name} (centre {_fmt(z.center)}, half {_fmt(z.half)} m)"
        if pred.settled_speed is not None:
            text += f" and moving at most {pred.settled_speed:g} m/s"
        if pred.released:
            text += ", released from the gripper"
        if pred.pushed:
            text += ", never carried (pushed, not lifted)"
        return text
    if isinstance(pred, Stacked):
        text = (f"{pred.prop} resting on {pred.on} (bottom face on top face within {pred.tolerance:g} m, "
                f"centres within {pred.xy:g} m horizontally)")
        if pred.settled_speed is not None:
            text += f", both moving at most {pred.settled_speed:g} m/s"
        if pred.released:
            text += f", {pred.prop} carried there and neither prop in the gripper"
        return text
    if isinstance(pred, Reached):
        goal = f"{pred.above:g} m above {pred.prop}'s centre" if pred.above else f"{pred.prop}'s centre"
        return f"gripper point within {pred.tolerance:g} m of {goal}"
    raise CaliperError(f"not a success predicate: {pred!r}")


def _leaves(pred: Predicate):
    if isinstance(pred, (AllOf, AnyOf)):
        for t in pred.terms:
            yield from _leaves(t)
    else:
        yield pred


def props_of(pred: Predicate) -> list[str]:
    """The props a predicate scores (a stack: both), in predicate order, each once."""
    names = (n for leaf in _leaves(pred)
             for n in (leaf.prop, *((leaf.on,) if isinstance(leaf, Stacked) else ())))
    return list(dict.fromkeys(names))


def zone_pairs(pred: Predicate) -> list[tuple[str, Zone]]:
    """The (prop, zone) pairs of its ``placed_in_zone`` terms, in predicate order, each once."""
    pairs = ((leaf.prop, leaf.zone) for leaf in _leaves(pred) if isinstance(leaf, PlacedInZone))
    return list(dict.fromkeys(pairs))


__all__ = ["CARRY_RISE", "CARRY_S", "carry_start", "carry_ticks", "carry_update", "describe", "dwell_ticks",
           "evaluate_np", "evaluator", "evaluator_np", "geometric", "held_mask", "latch", "needs_grasp",
           "needs_grip", "needs_velocity", "props_of", "released_props", "streak", "zone_pairs"]
