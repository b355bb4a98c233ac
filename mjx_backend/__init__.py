"""mjx_backend: MuJoCo (CPU, ``mujoco.rollout``) and MJX (accelerator) contact simulation behind
caliper_jax's backend contract, from MJCF generated out of a caliper Model.

Modules, one job each: ``mjcf`` (Model -> MJCF, host-side), ``materials``, ``scene`` (props),
``options``, ``layout`` (compile + index maps), ``base`` (the contract once), ``cpu``,
``mjx_sim``, ``randomize``, ``lint`` (C001-C003), ``grasp`` (weld), ``sensors`` (ray casts),
``versions`` (the pinned pair), ``cli``. Names load lazily.
"""
from __future__ import annotations

import importlib

_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = module


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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mjx_backend' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
