"""Lazy public names for a package's ``__init__``: ``from pkg import name`` imports the module that
defines ``name`` on first use, so a package can list its API without importing JAX up front.

    _lazy = LazyExports(__name__, globals())
    _lazy.add(".schema", "Task", "load_task")
    __all__, __getattr__, __dir__ = _lazy.all(), _lazy.getattr, _lazy.dir
"""
from __future__ import annotations

import importlib


class LazyExports:
    """The ``name -> module`` table of package ``package`` whose globals are ``namespace``;
    ``subpackages`` are exported under their own name (the module itself, not an attribute)."""

    def __init__(self, package: str, namespace: dict, subpackages: tuple = ()):
        self.package, self.namespace, self.subpackages = package, namespace, tuple(subpackages)
        self.exports: dict[str, str] = {}

    def add(self, module: str, *names: str) -> None:
        for name in names:
            self.exports[name] = module

    def all(self) -> list[str]:
        return sorted(self.exports)

    def getattr(self, name: str):
        if name in self.subpackages:
            return importlib.import_module("." + name, self.package)    # the import binds it
        module = self.exports.get(name)
        if module is None:
            raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, self.package), name)
        self.namespace[name] = value
        return value

    def dir(self) -> list[str]:
        return sorted(set(self.namespace) | set(self.exports) | set(self.subpackages))


__all__ = ["LazyExports"]
