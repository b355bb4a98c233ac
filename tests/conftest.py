"""Shared fixtures.

Tests run at the user's default precision, float32. A test that compares against a float64
reference opts in with ``@pytest.mark.x64`` (or the ``x64`` fixture): float64 is on for that test
only and restored afterwards; ``pytestmark = pytest.mark.x64`` turns a whole reference module,
module-scoped fixtures included, to float64. Module- and session-scoped fixtures shared by float32
and x64 tests are built at the default precision, so models that must be float64 say so
(``load(name, dtype=jnp.float64)`` inside the x64 test, or ``model.astype``). Compiled functions are
cached per robot so each compiles once. CLI subprocesses share a session-scoped temporary
compilation cache (``CALIPER_CACHE_DIR``).

``slow`` tests (``-m slow``) are excluded by pyproject's addopts; each covers a capability that a
faster default test also exercises.
"""
import os
import shutil
import tempfile

import jax
import pytest

# CLI subprocesses started by tests share one throwaway compilation cache (warm after its first
# use) instead of writing into the user's ~/.cache; removed when the session ends.
_CACHE = None
if "CALIPER_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="caliper-test-cache-")
    os.environ["CALIPER_CACHE_DIR"] = _CACHE


def pytest_unconfigure(config):
    if _CACHE is not None:
        shutil.rmtree(_CACHE, ignore_errors=True)


def pytest_configure(config):
    config.addinivalue_line("markers", "reference: compares against a reference implementation")
    config.addinivalue_line("markers", "x64: run this test with jax_enable_x64 on (restored afterwards)")


@pytest.fixture
def x64():
    """float64 for the duration of one test."""
    with jax.enable_x64(True):
        yield


def _module_marked_x64(module) -> bool:
    marks = getattr(module, "pytestmark", [])
    return any(m.name == "x64" for m in (marks if isinstance(marks, list) else [marks]))


# Every compiled XLA CPU executable holds ~9 memory mappings; a process may hold vm.max_map_count
# (65530 by default) of them, and LLVM aborts the process (SIGABRT inside a compile) when it runs out.
# The default suite compiles more than 7000 executables in one process, so the compilation caches
# are dropped between modules once half the budget is used (rarely: a few recompiles follow).
MAP_BUDGET = 0.5


def _map_counts():
    """(mappings held by this process, vm.max_map_count), or None where /proc does not say."""
    try:
        with open(f"/proc/{os.getpid()}/maps") as f:
            held = sum(1 for _ in f)
        with open("/proc/sys/vm/max_map_count") as f:
            return held, int(f.read())
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_code():
    yield
    counts = _map_counts()
    if counts is not None and counts[0] > MAP_BUDGET * counts[1]:
        import gc

        jax.clear_caches()
        gc.collect()


@pytest.fixture(scope="module", autouse=True)
def _x64_module(request):
    """A module marked x64 as a whole (``pytestmark``) builds its module-scoped fixtures in float64
    too; a module with only some x64 tests builds shared fixtures at the default precision."""
    if not _module_marked_x64(request.module):
        yield
        return
    with jax.enable_x64(True):
        yield


@pytest.fixture(autouse=True)
def _x64_marker(request):
    # The CLI's load_robot flips jax_enable_x64 on globally (a command line runs in float64): undo
    # that after each test so one in-process CLI test cannot switch the rest of the session to float64.
    before = jax.enable_x64.get_global()
    try:
        if request.node.get_closest_marker("x64") is None:
            yield
        else:
            with jax.enable_x64(True):
                yield
    finally:
        if jax.enable_x64.get_global() != before:
            jax.config.update("jax_enable_x64", before)


@pytest.fixture(scope="session")
def fixture_models():
    """The fixture robots at the user's default precision, float32 (explicit: this session-scoped
    fixture may first be built inside an x64 test). Load float64 copies where a test needs them."""
    import jax.numpy as jnp

    from caliper_jax.loading import load

    names = ("pendulum2", "collide_arm", "gripper_arm", "toy")
    return {name: load(name, dtype=jnp.float32) for name in names}
