"""The warning channel: one int32 bit mask per tick saying whether and why the safety layer (or
the effort saturation) intervened, plus host-side helpers that name the bits.

Inside a trace the flags are plain ``int32`` scalars, OR-ed together; a rollout also counts each
bit and remembers the first tick it was raised (see ``caliper_jax.control.loop.WarnStats``).
"""
from __future__ import annotations

import numpy as np

NONFINITE_TARGET = 1 << 0   # the target held NaN/inf: the last command was used instead
POSITION_CLAMP = 1 << 1     # the target lay outside the position limits: clamped
RATE_LIMIT = 1 << 2         # the command moved more than vmax * dt in one tick: limited
ESTOP = 1 << 3              # the e-stop is latched this tick: zero effort, command frozen
ESTOP_REQUEST = 1 << 4      # the setpoint stream asked for an e-stop
WATCHDOG_HOLD = 1 << 5      # no fresh target for N ticks: holding the measured position
WATCHDOG_ESTOP = 1 << 6     # no fresh target for N ticks: e-stop
GRAVITY_OVERLOAD = 1 << 7   # static gravity torque at the command exceeds the effort cap: e-stop
CHECK_REJECT = 1 << 8       # a pluggable check (e.g. collision) rejected the command
EFFORT_SATURATED = 1 << 9   # the computed torque was clipped to +-effort on some joint
VELOCITY_CLAMP = 1 << 10    # velocity mode: the velocity target exceeded vmax: clamped
NONFINITE_STATE = 1 << 11   # the measured state (or the computed effort) was non-finite: e-stop

#: Bit names in bit order (index b names the flag ``1 << b``).
NAMES = (
    "nonfinite_target",
    "position_clamp",
    "rate_limit",
    "estop",
    "estop_request",
    "watchdog_hold",
    "watchdog_estop",
    "gravity_overload",
    "check_reject",
    "effort_saturated",
    "velocity_clamp",
    "nonfinite_state",
)
NFLAGS = len(NAMES)
BY_NAME = {name: 1 << i for i, name in enumerate(NAMES)}


def describe(flags) -> list[str]:
    """Names of the bits set in one flag word (host side)."""
    value = int(flags)
    return [name for i, name in enumerate(NAMES) if value & (1 << i)]


def summary(counts, first_tick) -> dict:
    """``{name: {"count": n, "first_tick": k}}`` for every bit that was raised, from the per-bit
    counters of a rollout (arrays of shape (NFLAGS,); first_tick -1 = never)."""
    counts, first_tick = np.asarray(counts), np.asarray(first_tick)
    return {name: {"count": int(counts[i]), "first_tick": int(first_tick[i])}
            for i, name in enumerate(NAMES) if counts[i] > 0}


def summary_from_flags(flags) -> dict:
    """The same summary from a per-tick flag array (T,) (host side)."""
    flags = np.asarray(flags).astype(np.int64).reshape(-1)
    bits = (flags[:, None] >> np.arange(NFLAGS)) & 1
    counts = bits.sum(axis=0)
    first = np.where(counts > 0, bits.argmax(axis=0), -1)
    return summary(counts, first)


__all__ = ["NAMES", "NFLAGS", "BY_NAME", "describe", "summary", "summary_from_flags",
           "NONFINITE_TARGET", "POSITION_CLAMP", "RATE_LIMIT", "ESTOP", "ESTOP_REQUEST", "WATCHDOG_HOLD",
           "WATCHDOG_ESTOP", "GRAVITY_OVERLOAD", "CHECK_REJECT", "EFFORT_SATURATED", "VELOCITY_CLAMP",
           "NONFINITE_STATE"]
