"""Closed-loop control: computed-torque controller, the SafetyMonitor gate, setpoint sources,
``lax.scan`` rollouts (vmappable over worlds, seeds and model parameters), a tick-by-tick
``ControlLoop`` over any backend, and LeRobot v3 recording.

Pure functions (``gate``, ``computed_torque``, ``step``, ``rollout`` ...) never call ``jit``;
the host faces (``simulate``, ``record``, ``ControlLoop``) compile. See docs/control.md.
"""
from caliper_jax.control import flags
from caliper_jax.control.controller import (
    DT,
    KD,
    KP,
    ControlParams,
    computed_torque,
    control_params,
    saturate,
)
from caliper_jax.control.loop import (
    LoopState,
    TickOutput,
    WarnStats,
    batched_rollout,
    controller_tick,
    init_state,
    plant_step,
    rollout,
    step,
)
from caliper_jax.control.record import Recorder, RecordResult, decimation, record
from caliper_jax.control.runner import ControlLoop, Rollout, TickResult, simulate
from caliper_jax.control.safety import (
    Command,
    SafetyParams,
    SafetyState,
    Setpoint,
    Warnings,
    clear_estop,
    gate,
    init_safety,
    request_estop,
    safety_params,
    setpoint,
)
from caliper_jax.control.sources import (
    ConstantSource,
    IKStreamSource,
    TeleopSource,
    TrajectorySource,
    goal_source,
    ik_goal_source,
    ik_stream_source,
    teleop_map,
    teleop_source,
    trajectory_source,
)

__all__ = [
    "DT", "KD", "KP", "Command", "ConstantSource", "ControlLoop", "ControlParams", "IKStreamSource",
    "LoopState", "RecordResult", "Recorder", "Rollout", "SafetyParams", "SafetyState", "Setpoint",
    "TeleopSource", "TickOutput", "TickResult", "TrajectorySource", "WarnStats", "Warnings",
    "batched_rollout", "clear_estop", "computed_torque", "control_params", "controller_tick", "decimation",
    "flags", "gate", "goal_source", "ik_goal_source", "ik_stream_source", "init_safety", "init_state",
    "plant_step", "record", "request_estop", "rollout", "safety_params", "saturate", "setpoint", "simulate",
    "step", "teleop_map", "teleop_source", "trajectory_source",
]
