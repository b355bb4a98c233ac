"""The closed loop as pure functions: one tick is ``step``; a rollout is one ``lax.scan`` of it.

Per tick: measure (optionally with seeded sensor noise) -> ask the source for a setpoint -> gate
it (:func:`caliper_jax.control.safety.gate`) -> computed torque on the gated command ->
saturate to +-effort -> zero it while e-stopped or if anything is non-finite -> integrate the
plant (semi-implicit Euler by default) over ``substeps`` steps of ``dt / substeps``.

``rollout`` is vmappable over worlds (initial states), seeds (the PRNG key in the state),
sources (stacked leaves) and randomised model parameters (``model_in_axes``); see
:func:`batched_rollout`. ``controller_tick`` is the plant-free half, for real or simulated
backends driven tick by tick from Python (:class:`caliper_jax.control.runner.ControlLoop`).
No jit in here; the host layer compiles.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from caliper_jax.configuration import integrate_pos
from caliper_jax.control import flags as F
from caliper_jax.control.controller import ControlParams, computed_torque_from, dynamics_terms, saturate
from caliper_jax.control.safety import (
    SafetyParams,
    SafetyState,
    Setpoint,
    Warnings,
    gate,
    init_safety,
)
from caliper_jax.dynamics import solve_spd
from caliper_jax.errors import CaliperError
from caliper_jax.integrators import step as integrate
from caliper_jax.model import Model


class WarnStats(NamedTuple):
    """Running per-bit counters: how many ticks raised each flag, and the first such tick."""

    count: Any         # (NFLAGS,) int32
    first: Any         # (NFLAGS,) int32, -1 = never
    max_abs_tau: Any   # (nv,) largest |applied effort| so far


class LoopState(NamedTuple):
    q: Any               # (nq,) plant position
    v: Any               # (nv,) plant velocity
    safety: SafetyState
    tick: Any            # () int32
    key: Any             # PRNG key (sensor noise)
    stats: WarnStats


class TickOutput(NamedTuple):
    """One row of a rollout: the measured state at the tick, the gated command sent (the
    position command, or the velocity command in velocity mode), the applied effort and the
    warning flags."""

    q: Any
    v: Any
    command: Any
    tau: Any
    flags: Any


def init_state(model: Model, q0, v0=None, key=None) -> LoopState:
    """Loop state at tick 0 (the first command holds ``q0``)."""
    q0 = jnp.asarray(q0, model.dtype)
    v0 = jnp.zeros(model.nv, model.dtype) if v0 is None else jnp.asarray(v0, model.dtype)
    key = jax.random.PRNGKey(0) if key is None else key
    stats = WarnStats(jnp.zeros(F.NFLAGS, jnp.int32), jnp.full(F.NFLAGS, -1, jnp.int32),
                      jnp.zeros(model.nv, model.dtype))
    return LoopState(q0, v0, init_safety(q0, model.nv), jnp.zeros((), jnp.int32), key, stats)


def _finite(x):
    return jnp.all(jnp.isfinite(x))


def _controller(model: Model, params: ControlParams, safety: SafetyParams, state: SafetyState,
                target: Setpoint, q, v):
    state_ok = _finite(q) & _finite(v)
    q_safe = jnp.where(state_ok, q, state.last_q)
    v_safe = jnp.where(state_ok, v, jnp.zeros_like(v))
    state = state._replace(estop=state.estop | ~state_ok)
    cmd, state, warn = gate(safety, state, target, q_safe, params.mode)
    M, b = dynamics_terms(model, q_safe, v_safe)
    raw = computed_torque_from(M, b, q_safe, v_safe, cmd.q, cmd.qd, cmd.qdd, params.kp, params.kd,
                               params.mode)
    tau, clipped = saturate(model, raw)
    tau_ok = _finite(tau)
    estop = state.estop | ~tau_ok
    state = state._replace(estop=estop)
    tau = jnp.where(estop, jnp.zeros_like(tau), tau)
    flags = warn.flags
    flags |= jnp.where(~state_ok | ~tau_ok, jnp.int32(F.NONFINITE_STATE | F.ESTOP), jnp.int32(0))
    flags |= jnp.where(jnp.any(clipped) & ~estop, jnp.int32(F.EFFORT_SATURATED), jnp.int32(0))
    return tau, cmd, state, Warnings(flags, warn.joints), (M, b)


def controller_tick(model: Model, params: ControlParams, safety: SafetyParams, state: SafetyState,
                    target: Setpoint, q, v):
    """Gate ``target`` and compute the effort to send -> (tau, Command, SafetyState, Warnings).

    ``tau`` is always finite: zero while e-stopped; a non-finite measurement or effort latches
    the e-stop (``NONFINITE_STATE``)."""
    return _controller(model, params, safety, state, target, q, v)[:4]


def plant_step(model: Model, q, v, tau, dt, integrator: str = "euler", substeps: int = 1):
    """Integrate the rigid-body dynamics (with joint damping) for ``dt`` in ``substeps`` steps."""
    h = dt / substeps
    if substeps == 1:
        return integrate(model, q, v, tau, h, integrator)
    body = lambda _, s: integrate(model, s[0], s[1], tau, h, integrator)
    return jax.lax.fori_loop(0, substeps, body, (q, v))


def _euler_shared(model: Model, q, v, tau, dt, M, b):
    """Semi-implicit Euler reusing the controller's M(q), b(q, v) at the same state:
    qdd = M^-1 (tau - b - D v) -- the same equations the integrator solves with ABA."""
    a = solve_spd(M, tau - b - model.dof_damping * v)
    v_next = v + dt * a
    return integrate_pos(model, q, v_next, dt), v_next


def _bits(flags):
    return (flags >> jnp.arange(F.NFLAGS, dtype=jnp.int32)) & 1


def _update_stats(stats: WarnStats, flags, tick, tau) -> WarnStats:
    bits = _bits(flags)
    first = jnp.where((stats.first < 0) & (bits > 0), tick, stats.first)
    return WarnStats(stats.count + bits, first, jnp.maximum(stats.max_abs_tau, jnp.abs(tau)))


def step(model: Model, params: ControlParams, safety: SafetyParams, source, state: LoopState):
    """One closed-loop tick -> (new LoopState, TickOutput)."""
    dtype = state.q.dtype
    t = state.tick.astype(dtype) * params.dt
    key, q_meas = state.key, state.q
    if params.sensor_noise > 0:
        key, sub = jax.random.split(key)
        q_meas = q_meas + params.sensor_noise * jax.random.normal(sub, state.q.shape, dtype)
    target = source.setpoint(state.tick, t, q_meas, state.v)
    tau, cmd, sstate, warn, (M, b) = _controller(model, params, safety, state.safety, target, q_meas, state.v)
    if params.integrator == "euler" and params.substeps == 1 and params.sensor_noise == 0:
        q, v = _euler_shared(model, state.q, state.v, tau, params.dt, M, b)
    else:
        q, v = plant_step(model, state.q, state.v, tau, params.dt, params.integrator, params.substeps)
    action = cmd.q if params.mode == "position" else cmd.qd
    out = TickOutput(q_meas, state.v, action, tau, warn.flags)
    stats = _update_stats(state.stats, warn.flags, state.tick, tau)
    return LoopState(q, v, sstate, state.tick + 1, key, stats), out


def _bind(model: Model, safety: SafetyParams) -> SafetyParams:
    """The gravity check runs on the rollout's own (possibly randomised) model."""
    return safety if safety.model is None else safety.replace(model=model)


def rollout(model: Model, params: ControlParams, safety: SafetyParams, source, state: LoopState,
            ticks: int, every: int = 1):
    """``ticks`` closed-loop ticks in one ``lax.scan`` -> (final LoopState, TickOutput rows).

    With ``every`` > 1 (it must divide ``ticks``) one row is kept per ``every`` ticks: the
    measured state, command and effort of the row's first tick, and the OR of the flags over
    its ``every`` ticks (exact decimation for recording)."""
    ticks, every = int(ticks), int(every)
    if ticks < 1 or every < 1 or ticks % every:
        raise CaliperError(f"rollout: ticks ({ticks}) must be a positive multiple of every ({every})")
    safety = _bind(model, safety)

    def tick(s, _):
        return step(model, params, safety, source, s)

    if every == 1:
        return jax.lax.scan(tick, state, None, length=ticks)

    def frame(s, _):
        s, rows = jax.lax.scan(tick, s, None, length=every)
        flags = jax.lax.reduce(rows.flags, jnp.int32(0), jax.lax.bitwise_or, (0,))
        return s, TickOutput(rows.q[0], rows.v[0], rows.command[0], rows.tau[0], flags)

    return jax.lax.scan(frame, state, None, length=ticks // every)


def batched_rollout(model: Model, params: ControlParams, safety: SafetyParams, source, state: LoopState,
                    ticks: int, every: int = 1, model_axes=None, source_axis=None):
    """:func:`rollout` vmapped over a leading world axis of ``state`` (q, v, key, ...), and
    optionally of the source (``source_axis=0``) and of the model leaves named by
    ``model_axes`` (from :func:`caliper_jax.model.model_in_axes`)."""
    def one(m, src, st):
        return rollout(m, params, safety, src, st, ticks, every)

    return jax.vmap(one, in_axes=(model_axes, source_axis, 0))(model, source, state)


__all__ = ["LoopState", "TickOutput", "WarnStats", "batched_rollout", "controller_tick", "init_state",
           "plant_step", "rollout", "step"]
