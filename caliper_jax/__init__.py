"""caliper_jax: a JAX-native, differentiable, vectorized robotics stack for serial arms.

Public names are loaded lazily so that JAX-free parts (``caliper_jax.dataset``,
``caliper_jax.errors``) can be imported without importing JAX.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = module


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'caliper_jax' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
