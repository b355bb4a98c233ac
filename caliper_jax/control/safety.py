"""The SafetyMonitor as a pure gate: ``gate(params, state, target) -> (command, new_state, warnings)``.

Every target passes through it before the controller sees it, in this order:

1. **Non-finite** targets never pass: the last command is used instead (``NONFINITE_TARGET``).
   A non-finite or non-fresh target counts as an idle tick for the watchdog.
2. **Watchdog**: after ``watchdog_ticks`` idle ticks in a row (no fresh target), either hold the
   measured position (``WATCHDOG_HOLD``, released by the next fresh target) or latch the e-stop
   (``WATCHDOG_ESTOP``). 0 ticks disables it.
3. **Position clamp** to the joint limits (``POSITION_CLAMP``).
4. **Rate limit**: the command moves at most ``vmax * dt`` per tick (``RATE_LIMIT``).
5. **Pluggable checks**: ``params.checks`` is a tuple of pure predicates ``check(q_command) ->
   bool`` (True = safe); any False rejects the command for the last one (``CHECK_REJECT``).
   A collision checker plugs in here.
6. **Static gravity**: if the gravity torque that holds the commanded pose exceeds
   ``gravity_margin`` times the effort cap on any joint, the e-stop latches (``GRAVITY_OVERLOAD``).
7. **E-stop** (requested by the target, or latched by 2 or 6) stays latched until
   :func:`clear_estop`: the command freezes and the loop sends zero effort (``ESTOP``).

Position mode gates a position command (with velocity/acceleration feed-forward, zeroed on
any joint the gate modified); velocity mode clamps the velocity to +-vmax and zeroes any
velocity that pushes a joint further past its limit. All of it is jit/vmap-able; the warnings
are an int32 bit mask (see :mod:`caliper_jax.control.flags`) plus a per-joint mask.
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.control import flags as F
from caliper_jax.dynamics import gravity_torques
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model

#: Relative slack of the rate limit, so a trajectory that respects vmax up to rounding is never
#: flagged.
RATE_SLACK = 1e-6
WATCHDOG_ACTIONS = ("hold", "estop")

_STATIC = dict(metadata={"static": True})


class Setpoint(NamedTuple):
    """What a setpoint source asks for at one tick. ``fresh`` False means nothing new arrived
    (the watchdog counts such ticks); ``estop`` True requests an emergency stop."""

    q: Any       # (nq,)
    qd: Any      # (nv,)
    qdd: Any     # (nv,)
    fresh: Any   # () bool
    estop: Any   # () bool


def setpoint(q, qd=None, qdd=None, fresh=True, estop=False) -> Setpoint:
    """A Setpoint with zero feed-forward by default (traceable)."""
    q = jnp.asarray(q)
    qd = jnp.zeros_like(q) if qd is None else jnp.asarray(qd, q.dtype)
    qdd = jnp.zeros_like(q) if qdd is None else jnp.asarray(qdd, q.dtype)
    return Setpoint(q, qd, qdd, jnp.asarray(fresh, bool), jnp.asarray(estop, bool))


class Command(NamedTuple):
    """The gated command: position (position mode; the measured position in velocity mode),
    velocity and acceleration feed-forward."""

    q: Any
    qd: Any
    qdd: Any


class Warnings(NamedTuple):
    flags: Any    # () int32 bit mask
    joints: Any   # (nq,) bool: joints whose command was modified


class SafetyState(NamedTuple):
    last_q: Any     # (nq,) last position command
    last_qd: Any    # (nv,) last velocity command
    hold_q: Any     # (nq,) watchdog hold position
    idle: Any       # () int32 idle ticks in a row
    holding: Any    # () bool
    estop: Any      # () bool, latched


@dataclasses.dataclass(frozen=True)
class SafetyParams:
    """Limits and switches of the gate. Arrays are traced leaves; ``model`` (a pytree, or None to
    skip the gravity check) supplies the static gravity torques; ``checks`` is static."""

    lower: Any            # (nq,)
    upper: Any            # (nq,)
    vmax: Any             # (nv,) inf where absent
    max_step: Any         # (nq,) vmax * dt * (1 + RATE_SLACK)
    effort: Any           # (nv,) inf where absent
    dt: Any               # ()
    watchdog_ticks: Any   # () int32, 0 = off
    watchdog_estop: Any   # () bool: False = hold, True = e-stop
    gravity_margin: Any   # () e-stop when |g(q)| > margin * effort
    model: Any = None     # Model or None
    checks: tuple = dataclasses.field(default=(), **_STATIC)

    def replace(self, **changes) -> SafetyParams:
        return dataclasses.replace(self, **changes)


jax.tree_util.register_dataclass(
    SafetyParams,
    data_fields=["lower", "upper", "vmax", "max_step", "effort", "dt", "watchdog_ticks", "watchdog_estop",
                 "gravity_margin", "model"],
    meta_fields=["checks"])


def safety_params(model: Model, dt: float = 1e-3, *, lower=None, upper=None, vmax=None, effort=None,
                  watchdog_ticks: int = 0, watchdog: str = "hold", gravity_check: bool = True,
                  gravity_margin: float = 1.0, checks=()) -> SafetyParams:
    """Gate parameters from the model's limits (each overridable), validated on the host.

    ``dt`` must be the control tick of the loop. ``watchdog``: "hold" or "estop" after
    ``watchdog_ticks`` idle ticks (0 = off). ``checks``: tuple of ``check(q) -> bool``."""
    if not (np.isfinite(dt) and dt > 0):
        raise CaliperError(f"dt must be a positive number of seconds, got {dt}")
    if watchdog not in WATCHDOG_ACTIONS:
        raise CaliperError(f"watchdog must be one of {WATCHDOG_ACTIONS}, got {watchdog!r}")
    if int(watchdog_ticks) != watchdog_ticks or watchdog_ticks < 0:
        raise CaliperError(f"watchdog_ticks must be a non-negative integer, got {watchdog_ticks}")
    if not (np.isfinite(gravity_margin) and gravity_margin > 0):
        raise CaliperError(f"gravity_margin must be > 0, got {gravity_margin}")
    if model.nq != model.nv:
        raise CaliperError(f"the joint-space safety gate needs nq == nv; {model.name!r} has "
                           f"nq={model.nq}, nv={model.nv}")
    checks = tuple(checks)
    for c in checks:
        if not callable(c):
            raise CaliperError(f"checks: {c!r} is not callable")

    def vec(value, default, name):
        arr = np.asarray(default if value is None else value, dtype=np.float64)
        arr = np.broadcast_to(arr, (model.nv,)).copy() if arr.ndim == 0 else arr
        if arr.shape != (model.nv,):
            raise CaliperError(f"{name}: expected {model.nv} values, got shape {arr.shape}")
        if np.isnan(arr).any():
            raise CaliperError(f"{name}: NaN limit")
        return arr

    lo = vec(lower, model.qpos_lower, "lower")
    hi = vec(upper, model.qpos_upper, "upper")
    if np.any(lo > hi):
        j = int(np.flatnonzero(lo > hi)[0])
        name = model.joint_names[j] if len(model.joint_names) == model.nv else str(j)
        raise CaliperError(f"lower limit above upper limit on joint {name} ({lo[j]:.6g} > {hi[j]:.6g})")
    vel = vec(vmax, model.dof_velocity_limit, "vmax")
    eff = vec(effort, model.dof_effort_limit, "effort")
    for name, arr in (("vmax", vel), ("effort", eff)):
        if np.any(arr <= 0):
            raise CaliperError(f"{name}: limits must be > 0 (use inf for none), got {arr}")
    d = model.dtype
    return SafetyParams(
        lower=jnp.asarray(lo, d), upper=jnp.asarray(hi, d), vmax=jnp.asarray(vel, d),
        max_step=jnp.asarray(vel * dt * (1.0 + RATE_SLACK), d), effort=jnp.asarray(eff, d),
        dt=jnp.asarray(dt, d), watchdog_ticks=jnp.asarray(int(watchdog_ticks), jnp.int32),
        watchdog_estop=jnp.asarray(watchdog == "estop"), gravity_margin=jnp.asarray(gravity_margin, d),
        model=model if gravity_check else None, checks=checks)


def init_safety(q0, v_dim: int | None = None) -> SafetyState:
    """Gate state starting from the measured position ``q0`` (the first command holds it)."""
    q0 = jnp.asarray(q0)
    n = q0.shape[-1] if v_dim is None else v_dim
    return SafetyState(q0, jnp.zeros(q0.shape[:-1] + (n,), q0.dtype), q0,
                       jnp.zeros(q0.shape[:-1], jnp.int32), jnp.zeros(q0.shape[:-1], bool),
                       jnp.zeros(q0.shape[:-1], bool))


def request_estop(state: SafetyState) -> SafetyState:
    """Latch the e-stop."""
    return state._replace(estop=jnp.ones_like(state.estop))


def clear_estop(state: SafetyState, q_measured) -> SafetyState:
    """Clear the latch; the command restarts from the measured position (no jump)."""
    q = jnp.asarray(q_measured, state.last_q.dtype)
    return state._replace(estop=jnp.zeros_like(state.estop), last_q=q, hold_q=q,
                          last_qd=jnp.zeros_like(state.last_qd), idle=jnp.zeros_like(state.idle),
                          holding=jnp.zeros_like(state.holding))


def _all_finite(*xs):
    ok = jnp.ones((), bool)
    for x in xs:
        ok = ok & jnp.all(jnp.isfinite(x))
    return ok


def _bit(cond, flag):
    return jnp.where(cond, jnp.int32(flag), jnp.int32(0))


class Pending(NamedTuple):
    """The gate between its two halves: everything but the static-gravity check."""

    cmd_q: Any
    cmd_qd: Any
    qdd: Any
    probe: Any        # the position whose static gravity torque is checked
    here: Any
    flags: Any
    fresh: Any
    ok: Any
    holding: Any
    hold_q: Any
    idle: Any
    wd_estop: Any
    request: Any
    changed_j: Any
    vclamp_j: Any


def gate(params: SafetyParams, state: SafetyState, target: Setpoint, q_measured=None,
         mode: str = "position"):
    """Vet one target -> (Command, new SafetyState, Warnings). ``q_measured`` (nq,) is where the
    watchdog holds and what velocity mode guards; without it the last command stands in."""
    pending = gate_prepare(params, state, target, q_measured, mode)
    g = None if params.model is None else gravity_torques(params.model, pending.probe)
    return gate_finish(params, state, pending, g, mode)


def gate_prepare(params: SafetyParams, state: SafetyState, target: Setpoint, q_measured=None,
                 mode: str = "position") -> Pending:
    """First half of :func:`gate`: validity, watchdog, clamps, rate limit and pluggable checks."""
    dtype = state.last_q.dtype
    here = state.last_q if q_measured is None else jnp.asarray(q_measured, dtype)
    tq, tqd, tqdd = (jnp.asarray(x, dtype) for x in (target.q, target.qd, target.qdd))
    valid = _all_finite(tq, tqd, tqdd)
    fresh = valid & jnp.asarray(target.fresh, bool)
    flags = _bit(~valid & jnp.asarray(target.fresh, bool), F.NONFINITE_TARGET)

    # watchdog
    idle = jnp.where(fresh, 0, state.idle + 1).astype(jnp.int32)
    tripped = (params.watchdog_ticks > 0) & (idle >= params.watchdog_ticks)
    holding = tripped & ~params.watchdog_estop
    hold_q = jnp.where(holding & ~state.holding, here, state.hold_q)
    wd_estop = tripped & params.watchdog_estop
    flags |= _bit(holding, F.WATCHDOG_HOLD) | _bit(wd_estop, F.WATCHDOG_ESTOP)

    zero = jnp.zeros_like(tqd)
    if mode == "position":
        raw = jnp.where(fresh, tq, jnp.where(holding, hold_q, state.last_q))
        clamped = jnp.clip(raw, params.lower, params.upper)
        clamp_j = clamped != raw
        delta = clamped - state.last_q
        limited = jnp.clip(delta, -params.max_step, params.max_step)
        rate_j = limited != delta
        cmd_q = jnp.where(rate_j, state.last_q + limited, clamped)
        cmd_qd = jnp.clip(tqd, -params.vmax, params.vmax)
        vclamp_j = fresh & (cmd_qd != tqd)
        changed_j = clamp_j | rate_j
        probe = cmd_q
    elif mode == "velocity":
        raw = jnp.where(fresh, tqd, jnp.where(holding, zero, state.last_qd))
        cmd_qd = jnp.clip(raw, -params.vmax, params.vmax)
        vclamp_j = cmd_qd != raw
        outward = ((here <= params.lower) & (cmd_qd < 0)) | ((here >= params.upper) & (cmd_qd > 0))
        cmd_qd = jnp.where(outward, zero, cmd_qd)
        clamp_j = outward
        rate_j = jnp.zeros_like(clamp_j)
        cmd_q = here
        changed_j = clamp_j | vclamp_j
        probe = here + cmd_qd * params.dt
    else:
        raise CaliperError(f"gate mode must be 'position' or 'velocity', got {mode!r}")
    flags |= _bit(jnp.any(clamp_j), F.POSITION_CLAMP) | _bit(jnp.any(rate_j), F.RATE_LIMIT)
    flags |= _bit(jnp.any(vclamp_j), F.VELOCITY_CLAMP)

    # pluggable checks: reject for the last command
    ok = jnp.ones((), bool)
    for check in params.checks:
        ok = ok & jnp.asarray(check(probe), bool).reshape(())
    flags |= _bit(~ok, F.CHECK_REJECT)
    cmd_q = jnp.where(ok, cmd_q, state.last_q if mode == "position" else here)
    cmd_qd = jnp.where(ok, cmd_qd, zero)
    probe = jnp.where(ok, probe, here)
    return Pending(cmd_q, cmd_qd, tqdd, probe, here, flags, fresh, ok, holding, hold_q, idle, wd_estop,
                   jnp.asarray(target.estop, bool), changed_j, vclamp_j)


def gate_finish(params: SafetyParams, state: SafetyState, p: Pending, gravity=None, mode: str = "position"):
    """Second half of :func:`gate`: the static-gravity check on ``gravity`` = g(p.probe) (None
    skips it), the e-stop latch and the feed-forward -> (Command, SafetyState, Warnings)."""
    flags = p.flags
    overload = jnp.zeros((), bool)
    if gravity is not None:
        overload = jnp.any(jnp.abs(gravity) > params.gravity_margin * params.effort)
    flags |= _bit(overload, F.GRAVITY_OVERLOAD) | _bit(p.request, F.ESTOP_REQUEST)
    estop = state.estop | p.request | p.wd_estop | overload
    # while latched the command is frozen: clamp/rate/check interventions did not happen
    moot = jnp.int32(F.POSITION_CLAMP | F.RATE_LIMIT | F.VELOCITY_CLAMP | F.CHECK_REJECT)
    flags = jnp.where(estop, flags & ~moot, flags) | _bit(estop, F.ESTOP)
    frozen = state.last_q if mode == "position" else p.here
    cmd_q = jnp.where(estop, frozen, p.cmd_q)

    zero = jnp.zeros_like(p.cmd_qd)
    modified = p.changed_j | ~p.ok | ~p.fresh | p.holding | estop
    cmd_qd = jnp.where(estop | (modified if mode == "position" else jnp.zeros_like(modified)), zero, p.cmd_qd)
    cmd_qdd = jnp.where(modified, zero, p.qdd)
    new = SafetyState(cmd_q, cmd_qd, p.hold_q, p.idle, p.holding, estop)
    return Command(cmd_q, cmd_qd, cmd_qdd), new, Warnings(flags, (p.changed_j | p.vclamp_j) & ~estop)


__all__ = ["Command", "Pending", "RATE_SLACK", "SafetyParams", "SafetyState", "Setpoint", "Warnings",
           "clear_estop", "gate", "gate_finish", "gate_prepare", "init_safety", "request_estop",
           "safety_params", "setpoint"]
