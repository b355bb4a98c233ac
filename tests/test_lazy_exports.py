"""The lazily exported names of every package (caliper_jax.lazy): each resolves, none shadows a
submodule of the same name (``learn.evaluate`` must stay the module after ``learn.evaluate`` the
function was looked up), and importing a package imports no JAX."""
from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

PACKAGES = ("caliper_jax", "mjx_backend", "tasks", "learn")


@pytest.mark.parametrize("package", PACKAGES)
def test_exports_resolve_and_never_shadow_a_submodule(package):
    pkg = importlib.import_module(package)
    submodules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    names = set(pkg._lazy.exports)
    assert names, package
    assert not sorted(names & submodules), f"{package}: exported names shadow submodules"
    for name in sorted(names):
        assert getattr(pkg, name) is not None
    assert set(dir(pkg)) >= names


def test_importing_the_packages_imports_no_jax():
    code = ("import sys, caliper_jax, mjx_backend, tasks, learn\n"
            "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if m.startswith('jax'))\n")
    subprocess.run([sys.executable, "-c", code], check=True)
