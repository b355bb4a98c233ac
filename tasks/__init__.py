"""tasks: the task artifact (``*.caliper-task.json``), its loader, the success-predicate evaluator,
the task zoo (``tasks/zoo``), scene building, witnesses and the task check, the vectorized
environment (CPU and MJX engines, gymnasium adapter in ``tasks.gym``), the scripted expert and
demonstration recording (docs/tasks.md). Names load lazily; importing ``tasks`` never imports JAX."""
from __future__ import annotations

from caliper_jax.lazy import LazyExports

_lazy = LazyExports(__name__, globals())
_export = _lazy.add


_export(".schema", "SCHEMA_VERSION", "TASK_SUFFIX", "ZOO_DIR", "AllOf", "AnyOf", "GripperSpec", "Lifted",
        "PlacedInZone", "Predicate", "Stacked", "Task", "Zone", "find_task", "load_task", "parse_task",
        "predicate_from_dict", "predicate_to_dict", "task_to_dict", "zoo_files", "zoo_names")
_export(".predicates", "describe", "evaluate_np", "evaluator", "evaluator_np", "latch", "needs_grasp",
        "needs_velocity", "props_of", "zone_pairs")
_export(".scene", "TaskScene", "build_scene")
_export(".witness", "Witness", "verify_witness")   # the function witness: tasks.witness.witness
_export(".check", "check_task")
_export(".env_spec", "EnvLayout", "EnvRandomization", "RANDOMIZATION_LEVELS", "observation_parts",
        "randomization_preset")
_export(".env", "VecEnv")
_export(".env_mjx", "MjxEnv")
_export(".expert", "ScriptedExpert", "plan_demo")
_export(".demo", "record_demos", "run_episodes")
_export(".coverage", "CoverageReport", "generate_coverage")

__all__, __getattr__, __dir__ = _lazy.all(), _lazy.getattr, _lazy.dir
