"""mjx_backend: MuJoCo (CPU, ``mujoco.rollout``) and MJX (accelerator) contact simulation behind
caliper_jax's backend contract, from MJCF generated out of a caliper Model.

Modules, one job each: ``mjcf`` (Model -> MJCF, host-side), ``materials``, ``scene`` (props),
``options``, ``layout`` (compile + index maps), ``base`` (the contract once), ``cpu``,
``mjx_sim``, ``randomize``, ``lint`` (C001-C003), ``grasp`` (weld), ``sensors`` (ray casts),
``versions`` (the pinned pair), ``cli``. Names load lazily.
"""
from __future__ import annotations

from caliper_jax.lazy import LazyExports

_lazy = LazyExports(__name__, globals())
_export = _lazy.add


_export(".versions", "PINNED", "check_pinned", "installed_versions")
_export(".materials", "Material", "PRESETS", "resolve_material", "validate_material")
_export(".options", "SimOptions")
_export(".scene", "Prop")
_export(".mjcf", "ACTUATORS", "Mjcf", "model_to_mjcf", "save_mjcf")
_export(".layout", "CompiledScene", "Layout", "compile_scene")
_export(".cpu", "Contact", "MujocoBackend")
_export(".mjx_sim", "MjxBackend")
_export(".randomize", "RandomizationSpec", "sample", "mjmodels", "batch_mjx_model")
_export(".lint", "ContactFinding", "SettleRecord", "contact_lint", "lint_record", "settle")
_export(".grasp", "Gripper", "WeldGrasp", "detect_gripper")
_export(".sensors", "DepthCamera", "Lidar")

__all__, __getattr__, __dir__ = _lazy.all(), _lazy.getattr, _lazy.dir
