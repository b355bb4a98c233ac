"""The backend contract: control modes, lifecycle and safety, atomic state read-back, and a
tick-driven ``step(dt)``. No wall clock anywhere: nothing advances until ``step`` is called and
``time == ticks * timestep``, so rollouts are reproducible bit for bit.

A backend drives ``nworld`` independent worlds at once (1 for a single robot); every array in or
out carries that leading axis. Positions ``q`` (nworld, nq), velocities ``v`` (nworld, nv),
commands (nworld, nv) in the units of the active mode. NumPy in, NumPy out.

Lifecycle: a new backend is *disabled* (it applies zero effort). ``enable()`` energises it;
``disable()`` de-energises it. ``estop()`` latches: it de-energises and refuses ``enable()`` and
commands until ``clear_estop()``. ``reset()`` restores the full initial state (tick 0), so two
identical command sequences after a reset give identical states.
"""
from __future__ import annotations

import abc
import enum
from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError


class ControlMode(str, enum.Enum):
    POSITION = "position"   # command = joint position targets (nq == nv joints only)
    VELOCITY = "velocity"   # command = joint velocity targets
    TORQUE = "torque"       # command = joint efforts


@dataclass(frozen=True)
class BackendState:
    """An atomic snapshot (copies, never views of live buffers)."""

    q: np.ndarray            # (nworld, nq)
    v: np.ndarray            # (nworld, nv)
    effort: np.ndarray       # (nworld, nv) effort applied during the last step
    tick: int
    time: float              # tick * timestep
    enabled: bool
    estopped: bool
    mode: ControlMode


def check_step_dt(dt: float, timestep: float) -> int:
    """Number of internal steps for ``step(dt)``; ``dt`` must be a positive integer multiple of
    the backend's timestep (to 1e-9 relative), else a clear error."""
    if not np.isfinite(dt) or dt <= 0:
        raise CaliperError(f"step(dt): dt must be a positive number of seconds, got {dt}")
    n = round(dt / timestep)
    if n < 1 or abs(n * timestep - dt) > 1e-9 * max(dt, timestep):
        raise CaliperError(f"step(dt): dt={dt} is not an integer multiple of the timestep {timestep}")
    return int(n)


class Backend(abc.ABC):
    """What the control loop, teleop and the recorder talk to."""

    nworld: int
    nq: int
    nv: int
    timestep: float
    joint_names: tuple

    # ---- lifecycle and safety -----------------------------------------------------------------
    @abc.abstractmethod
    def enable(self) -> None: ...

    @abc.abstractmethod
    def disable(self) -> None: ...

    @abc.abstractmethod
    def estop(self) -> None:
        """Latch an emergency stop: zero applied effort (servo backends freeze their target at
        the current position) until :meth:`clear_estop`."""

    @abc.abstractmethod
    def clear_estop(self) -> None: ...

    @abc.abstractmethod
    def reset(self, q=None, v=None) -> BackendState:
        """Restore the full initial state (or the given q, v) at tick 0."""

    # ---- commands and time --------------------------------------------------------------------
    @abc.abstractmethod
    def set_mode(self, mode: ControlMode) -> None: ...

    @abc.abstractmethod
    def command(self, values) -> None:
        """Set the command for the active mode, (nworld, nv) or (nv,) broadcast to every world.
        Non-finite values are rejected with a clear error."""

    @abc.abstractmethod
    def step(self, dt: float) -> BackendState:
        """Advance every world by ``dt`` (an integer multiple of ``timestep``)."""

    @abc.abstractmethod
    def state(self) -> BackendState:
        """Atomic read-back of the current state."""
