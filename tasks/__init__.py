"""tasks: the task artifact (``*.caliper-task.json``), its loader, the success-predicate evaluator,
the task zoo (``tasks/zoo``), scene building, witnesses and the task check, the vectorized
environment (CPU and MJX engines, gymnasium adapter in ``tasks.gym``), the scripted expert and
demonstration recording (docs/tasks.md). Names load lazily; importing ``tasks`` never imports JAX."""
from __future__ import annotations

import importlib

_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = module


_export(".schema", "SCHEMA_VERSION", "TASK_SUFFIX", "ZOO_DIR", "AllOf", "AnyOf", "GripperSpec", "Lifted",
        "PlacedInZone", "Predicate", "Task", "Zone", "find_task", "load_task", "parse_task",
        "predicate_from_dict", "predicate_to_dict", "task_to_dict", "zoo_files", "zoo_names")
_export(".predicates", "describe", "evaluate_np", "evaluator", "latch", "needs_velocity", "props_of",
        "zone_pairs")
_export(".scene", "TaskScene", "build_scene")
_export(".witness", "Witness", "verify_witness", "witness")
_export(".check", "check_task")
_export(".env_spec", "EnvLayout", "EnvRandomization", "observation_parts")
_export(".env", "VecEnv")
_export(".env_mjx", "MjxEnv")
_export(".expert", "ScriptedExpert", "plan_demo")
_export(".demo", "record_demos", "run_episodes")

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tasks' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
