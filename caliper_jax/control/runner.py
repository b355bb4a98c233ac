"""Host-side faces of the closed loop: jitted rollouts with NumPy results, and
:class:`ControlLoop`, which drives any :class:`caliper_jax.backend.Backend` tick by tick from
Python with the same gate and controller the rollouts use.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.backend.contract import Backend, BackendState, ControlMode
from caliper_jax.control import flags as F
from caliper_jax.control.controller import ControlParams, control_params
from caliper_jax.control.loop import LoopState, batched_rollout, controller_tick, init_state, rollout
from caliper_jax.control.safety import (
    SafetyParams,
    Setpoint,
    clear_estop,
    init_safety,
    request_estop,
    safety_params,
)
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model, model_in_axes


class Rollout(NamedTuple):
    """NumPy results of :func:`simulate`. Rows (T,) or (nworld, T) leading; ``times`` (T,)."""

    times: np.ndarray
    q: np.ndarray
    v: np.ndarray
    command: np.ndarray
    tau: np.ndarray
    flags: np.ndarray
    q_final: np.ndarray
    v_final: np.ndarray
    estopped: np.ndarray
    warn_count: np.ndarray     # (..., NFLAGS)
    warn_first: np.ndarray     # (..., NFLAGS), -1 = never
    max_abs_tau: np.ndarray    # (..., nv)
    state: Any                 # the final LoopState (JAX arrays), to continue from

    def warnings(self, world: int | None = None) -> dict:
        """``{flag name: {count, first_tick}}`` (of one world, or summed / earliest over all)."""
        count, first = self.warn_count, self.warn_first
        if count.ndim == 2:
            if world is not None:
                count, first = count[world], first[world]
            else:
                first = np.where(first < 0, np.iinfo(np.int32).max, first).min(axis=0)
                first = np.where(first == np.iinfo(np.int32).max, -1, first)
                count = count.sum(axis=0)
        return F.summary(count, first)


def _rollout_host(model, params, safety, source, state, ticks, every, batched, leaves, source_batched):
    if not batched:
        return rollout(model, params, safety, source, state, ticks, every)
    axes = model_in_axes(model, leaves) if leaves else None
    return batched_rollout(model, params, safety, source, state, ticks, every, axes,
                           0 if source_batched else None)


_rollout_jit = jax.jit(_rollout_host,
                       static_argnames=("ticks", "every", "batched", "leaves", "source_batched"))


def check_dt(params: ControlParams, safety: SafetyParams) -> float:
    dt = float(params.dt)
    if abs(float(safety.dt) - dt) > 1e-12 * dt:
        raise CaliperError(f"safety params were built for dt={float(safety.dt)}, the loop runs at dt={dt}")
    return dt


def initial_states(model: Model, q0, v0=None, seed: int = 0) -> tuple[LoopState, bool]:
    """LoopState for one world (q0 (nq,)) or a batch (q0 (nworld, nq)); world i draws its noise
    from fold_in(PRNGKey(seed), i), so a world's stream does not depend on the batch size."""
    q0 = np.asarray(q0, dtype=np.float64)
    if q0.shape[-1:] != (model.nq,) or q0.ndim not in (1, 2):
        raise CaliperError(f"q0: expected ({model.nq},) or (nworld, {model.nq}), got shape {q0.shape}")
    if not np.all(np.isfinite(q0)):
        raise CaliperError("q0: non-finite values")
    key = jax.random.PRNGKey(int(seed))
    if q0.ndim == 1:
        return init_state(model, q0, v0, key), False
    n = q0.shape[0]
    v0 = np.zeros((n, model.nv)) if v0 is None else np.broadcast_to(np.asarray(v0, np.float64), (n, model.nv))
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(n))
    return jax.vmap(lambda q, v, k: init_state(model, q, v, k))(jnp.asarray(q0), jnp.asarray(v0), keys), True


def run_chunk(model, params, safety, source, state, ticks, every=1, batched=False, leaves=(),
              source_batched=False):
    """The jitted rollout on JAX arrays -> (final LoopState, TickOutput rows)."""
    return _rollout_jit(model, params, safety, source, state, ticks=int(ticks), every=int(every),
                        batched=bool(batched), leaves=tuple(leaves), source_batched=bool(source_batched))


def simulate(model: Model, source, q0, ticks: int, *, params: ControlParams | None = None,
             safety: SafetyParams | None = None, v0=None, seed: int = 0, randomized=(),
             source_batched: bool = False) -> Rollout:
    """Run a closed-loop rollout (one jitted ``lax.scan``; vmapped when ``q0`` is (nworld, nq))
    and return NumPy rows. ``randomized`` names Model leaves that carry a leading world axis."""
    params = params or control_params(model)
    safety = safety or safety_params(model, float(params.dt))
    dt = check_dt(params, safety)
    state, batched = initial_states(model, q0, v0, seed)
    if (randomized or source_batched) and not batched:
        raise CaliperError("randomized / source_batched need a batch of worlds: q0 of shape (nworld, nq)")
    final, rows = run_chunk(model, params, safety, source, state, ticks, 1, batched, tuple(randomized),
                            source_batched)
    final_np = jax.tree_util.tree_map(np.asarray, final)
    return Rollout(np.arange(int(ticks)) * dt, *(np.asarray(x) for x in rows), final_np.q, final_np.v,
                   final_np.safety.estop, final_np.stats.count, final_np.stats.first,
                   final_np.stats.max_abs_tau, final)


def _source_tick(model, params, safety, source, sstate, tick, q, v):
    t = jnp.asarray(tick, q.dtype) * params.dt
    target = source.setpoint(tick, t, q, v)
    return controller_tick(model, params, safety, sstate, target, q, v)


@lru_cache(maxsize=None)
def _loop_fns(target_batched: bool):
    axis = 0 if target_batched else None
    with_target = jax.jit(jax.vmap(controller_tick, in_axes=(None, None, None, 0, axis, 0, 0)))
    with_source = jax.jit(jax.vmap(_source_tick, in_axes=(None, None, None, axis, 0, None, 0, 0)))
    return with_target, with_source


class TickResult(NamedTuple):
    state: BackendState      # after the step
    command: np.ndarray      # (nworld, nq) gated command (the action)
    tau: np.ndarray          # (nworld, nv) effort sent
    flags: np.ndarray        # (nworld,) int32 warning flags of this tick


class ControlLoop:
    """Computed-torque loop over a backend in TORQUE mode, one tick per call.

    Each tick reads the backend's state, gates the target, computes and saturates the effort
    (zero for e-stopped worlds), commands it and steps the backend by ``dt``. ``last_warn``
    holds the flags of the last tick. A gate e-stop zeroes that world's effort; when every world
    is e-stopped the backend's own latch is set too. ``clear_estop()`` clears both."""

    def __init__(self, backend: Backend, model: Model, params: ControlParams | None = None,
                 safety: SafetyParams | None = None, enable: bool = True):
        if (backend.nq, backend.nv) != (model.nq, model.nv):
            raise CaliperError(f"backend has nq={backend.nq}, nv={backend.nv}; model {model.name!r} has "
                               f"nq={model.nq}, nv={model.nv}")
        self.backend, self.model = backend, model
        self.params = params or control_params(model)
        self.safety = (safety or safety_params(model, float(self.params.dt)))
        if self.safety.model is not None:
            self.safety = self.safety.replace(model=model)
        dt = check_dt(self.params, self.safety)
        # params.dt is held in the model's dtype (float32 stores 1e-3 as 1.00000005e-3): accept it to
        # that dtype's rounding and step the backend by the exact multiple of its timestep.
        n = round(dt / backend.timestep)
        if n < 1 or abs(n * backend.timestep - dt) > max(1e-9, 4 * float(jnp.finfo(model.dtype).eps)) * dt:
            raise CaliperError(f"the loop's dt={dt} is not an integer multiple of the backend's timestep "
                               f"{backend.timestep}")
        self.dt = n * backend.timestep
        backend.set_mode(ControlMode.TORQUE)
        st = backend.state()
        self.safety_state = jax.vmap(lambda q: init_safety(q, model.nv))(jnp.asarray(st.q, model.dtype))
        if enable and not st.estopped:
            backend.enable()
        self.tick = 0
        self.last_warn = np.zeros(backend.nworld, np.int32)

    def _apply(self, tau, sstate, cmd, flags) -> TickResult:
        self.safety_state = sstate
        tau_np = np.asarray(tau, dtype=np.float64)
        estop = np.asarray(sstate.estop)
        be = self.backend.state()
        if estop.all() and not be.estopped:
            self.backend.estop()
        elif not be.estopped:
            self.backend.command(tau_np)
        state = self.backend.step(self.dt)
        self.tick += 1
        self.last_warn = np.asarray(flags)
        return TickResult(state, np.asarray(cmd), tau_np, self.last_warn)

    def _measure(self):
        st = self.backend.state()
        if st.estopped:
            self.safety_state = self.safety_state._replace(estop=jnp.ones_like(self.safety_state.estop))
        d = self.model.dtype
        return jnp.asarray(st.q, d), jnp.asarray(st.v, d)

    def step_with_target(self, target: Setpoint, batched: bool = False) -> TickResult:
        """One tick toward ``target`` (shared by every world, or with a leading world axis)."""
        q, v = self._measure()
        fn, _ = _loop_fns(bool(batched))
        tau, cmd, sstate, warn = fn(self.model, self.params, self.safety, self.safety_state, target, q, v)
        return self._apply(tau, sstate, cmd.q if self.params.mode == "position" else cmd.qd, warn.flags)

    def step(self, source, batched: bool = False) -> TickResult:
        """One tick with the setpoint taken from ``source`` at this tick."""
        q, v = self._measure()
        _, fn = _loop_fns(bool(batched))
        tau, cmd, sstate, warn = fn(self.model, self.params, self.safety, source, self.safety_state,
                                    jnp.asarray(self.tick, jnp.int32), q, v)
        return self._apply(tau, sstate, cmd.q if self.params.mode == "position" else cmd.qd, warn.flags)

    def run(self, source, ticks: int, recorder=None, batched: bool = False) -> list[TickResult]:
        """``ticks`` ticks from ``source``; a :class:`~caliper_jax.control.record.Recorder` captures
        (measured q, command) at its decimated ticks."""
        out = []
        for _ in range(int(ticks)):
            q_before = self.backend.state().q
            tick = self.tick
            res = self.step(source, batched)
            if recorder is not None:
                recorder.capture(tick, q_before, res.command)
            out.append(res)
        return out

    def estop(self) -> None:
        self.safety_state = request_estop(self.safety_state)
        self.backend.estop()

    def clear_estop(self, enable: bool = True) -> None:
        q = jnp.asarray(self.backend.state().q, self.model.dtype)
        self.safety_state = jax.vmap(clear_estop)(self.safety_state, q)
        self.backend.clear_estop()
        if enable:
            self.backend.enable()


__all__ = ["ControlLoop", "Rollout", "TickResult", "check_dt", "initial_states", "run_chunk", "simulate"]
