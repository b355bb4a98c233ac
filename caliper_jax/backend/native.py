"""The native backend: a JAX simulator over the core dynamics (gravity, joint damping, no
contact), stepping ``nworld`` independent worlds at once through one jitted, vmapped function.

Modes: TORQUE applies the command (saturated to +-effort); POSITION and VELOCITY run a
computed-torque servo (kp, kd; default 100, 20) at every internal step toward the commanded
position (zero velocity) or velocity. Integration: semi-implicit Euler with ``timestep`` h
(default 1e-3) unless ``integrator="rk4"``/``"implicit"``. ``step(dt)`` takes ``dt / h`` internal
steps and accepts only integer multiples of h.

Lifecycle per the contract: a new backend is disabled (zero effort) in POSITION mode holding its
initial position (TORQUE for models with nq != nv). ``estop()`` latches: zero effort, a
position target frozen at the current position, ``enable()`` and ``command()`` refused until
``clear_estop()`` (which leaves the backend disabled). ``reset()`` restores the physical state,
tick, mode, command and the disabled state exactly; it does not clear a latched e-stop.

Per-world model parameters (domain randomisation) are supported: pass a Model whose leaves
named in ``randomized`` (e.g. ``("body_mass", "body_inertia")``) carry a leading nworld axis.
"""
from __future__ import annotations

from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.backend.contract import Backend, BackendState, ControlMode, check_step_dt
from caliper_jax.control.controller import KD, KP, computed_torque, saturate
from caliper_jax.errors import CaliperError
from caliper_jax.integrators import INTEGRATORS
from caliper_jax.integrators import step as integrate
from caliper_jax.model import Model, model_in_axes


def _world_advance(model: Model, q, v, cmd, energised, kp, kd, h, *, n: int, mode: str, integrator: str):
    """``n`` internal steps of one world -> (q, v, effort applied during the last step)."""
    zero = jnp.zeros_like(v)

    def body(carry, _):
        q_, v_, _ = carry
        if mode == "position":
            tau = computed_torque(model, q_, v_, cmd, zero, zero, kp, kd, "position")
        elif mode == "velocity":
            tau = computed_torque(model, q_, v_, q_, cmd, zero, kp, kd, "velocity")
        else:
            tau = cmd
        tau, _ = saturate(model, tau)
        tau = jnp.where(energised & jnp.all(jnp.isfinite(tau)), tau, zero)
        q_, v_ = integrate(model, q_, v_, tau, h, integrator)
        return (q_, v_, tau), None

    (q, v, tau), _ = jax.lax.scan(body, (q, v, zero), None, length=n)
    return q, v, tau


@lru_cache(maxsize=None)
def _advance_fn(randomized: tuple):
    """jit(vmap over worlds) of :func:`_world_advance`, one per set of per-world Model leaves."""
    def advance(model, q, v, cmd, energised, kp, kd, h, n, mode, integrator):
        world = partial(_world_advance, n=n, mode=mode, integrator=integrator)
        axes = (model_in_axes(model, randomized) if randomized else None, 0, 0, 0, None, None, None, None)
        return jax.vmap(world, in_axes=axes)(model, q, v, cmd, energised, kp, kd, h)

    return jax.jit(advance, static_argnames=("n", "mode", "integrator"))


class NativeBackend(Backend):
    """Native JAX simulator implementing :class:`caliper_jax.backend.Backend`."""

    def __init__(self, model: Model, nworld: int = 1, timestep: float = 1e-3, *, integrator: str = "euler",
                 q0=None, v0=None, kp=KP, kd=KD, randomized=()):
        if int(nworld) != nworld or nworld < 1:
            raise CaliperError(f"nworld must be a positive integer, got {nworld}")
        if not (np.isfinite(timestep) and timestep > 0):
            raise CaliperError(f"timestep must be a positive number of seconds, got {timestep}")
        if integrator not in INTEGRATORS:
            raise CaliperError(f"integrator must be one of {INTEGRATORS}, got {integrator!r}")
        self.model = model
        self.nworld, self.nq, self.nv = int(nworld), model.nq, model.nv
        self.timestep = float(timestep)
        self.integrator = integrator
        self.joint_names = tuple(model.joint_names)
        self._dtype = model.dtype
        self._kp = jnp.asarray(kp, self._dtype)
        self._kd = jnp.asarray(kd, self._dtype)
        self._randomized = tuple(randomized)
        model_in_axes(model, self._randomized)          # validates the names
        if self._randomized:
            default_q = np.zeros(model.nq)
        else:
            from caliper_jax.configuration import neutral
            default_q = np.asarray(neutral(model), dtype=np.float64)
        self._q0 = self._rows(default_q if q0 is None else q0, self.nq, "q0")
        self._v0 = self._rows(np.zeros(self.nv) if v0 is None else v0, self.nv, "v0")
        self._initial_mode = ControlMode.POSITION if self.nq == self.nv else ControlMode.TORQUE
        self._advance = _advance_fn(self._randomized)
        self._estopped = False
        self._restore(self._q0, self._v0)

    # ---- helpers ------------------------------------------------------------------------------
    def _rows(self, values, n: int, what: str) -> np.ndarray:
        arr = np.array(values, dtype=np.float64)
        if arr.shape == (n,):
            arr = np.broadcast_to(arr, (self.nworld, n)).copy()
        if arr.shape != (self.nworld, n):
            raise CaliperError(f"{what}: expected ({n},) or ({self.nworld}, {n}), got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise CaliperError(f"{what}: non-finite values are rejected")
        return arr

    def _restore(self, q: np.ndarray, v: np.ndarray) -> None:
        self._q = jnp.asarray(q, self._dtype)
        self._v = jnp.asarray(v, self._dtype)
        self._effort = jnp.zeros((self.nworld, self.nv), self._dtype)
        self._tick = 0
        self._enabled = False
        self._mode = self._initial_mode
        self._cmd = self._hold_command()

    def _hold_command(self) -> jnp.ndarray:
        if self._mode is ControlMode.POSITION:
            return self._q
        return jnp.zeros((self.nworld, self.nv), self._dtype)

    # ---- lifecycle and safety -----------------------------------------------------------------
    def enable(self) -> None:
        if self._estopped:
            raise CaliperError("enable(): the e-stop is latched; call clear_estop() first")
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    def estop(self) -> None:
        self._estopped = True
        self._enabled = False
        self._effort = jnp.zeros_like(self._effort)
        if self._mode is ControlMode.POSITION:
            self._cmd = self._q          # servo target frozen where the robot is
        else:
            self._cmd = jnp.zeros_like(self._cmd)

    def clear_estop(self) -> None:
        self._estopped = False

    def reset(self, q=None, v=None) -> BackendState:
        q = self._q0 if q is None else self._rows(q, self.nq, "reset q")
        v = self._v0 if v is None else self._rows(v, self.nv, "reset v")
        self._restore(q, v)
        return self.state()

    # ---- commands and time --------------------------------------------------------------------
    def set_mode(self, mode) -> None:
        try:
            mode = ControlMode(mode)
        except ValueError:
            raise CaliperError(f"unknown control mode {mode!r}; expected one of "
                               f"{[m.value for m in ControlMode]}") from None
        if mode is ControlMode.POSITION and self.nq != self.nv:
            raise CaliperError(f"position mode needs nq == nv; {self.model.name!r} has "
                               f"nq={self.nq}, nv={self.nv}")
        self._mode = mode
        self._cmd = self._hold_command()

    @property
    def mode(self) -> ControlMode:
        return self._mode

    def command(self, values) -> None:
        if self._estopped:
            raise CaliperError("command(): the e-stop is latched; call clear_estop() first")
        self._cmd = jnp.asarray(self._rows(values, self.nv, f"{self._mode.value} command"), self._dtype)

    def step(self, dt: float) -> BackendState:
        n = check_step_dt(dt, self.timestep)
        energised = jnp.asarray(self._enabled and not self._estopped)
        self._q, self._v, self._effort = self._advance(
            self.model, self._q, self._v, self._cmd, energised, self._kp, self._kd,
            jnp.asarray(self.timestep, self._dtype), n=n, mode=self._mode.value, integrator=self.integrator)
        self._tick += n
        return self.state()

    def state(self) -> BackendState:
        copy = lambda x: np.array(x, dtype=np.float64, copy=True)
        return BackendState(
            q=copy(self._q), v=copy(self._v), effort=copy(self._effort), tick=self._tick,
            time=self._tick * self.timestep, enabled=self._enabled and not self._estopped,
            estopped=self._estopped, mode=self._mode)


__all__ = ["NativeBackend"]
