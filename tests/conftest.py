"""Shared fixtures.

Tests run at the user's default precision, float32. A test that compares against a float64
reference opts in with ``@pytest.mark.x64`` (or the ``x64`` fixture): float64 is on for that test
only and restored afterwards. Compiled functions are cached per robot so each compiles once.
"""
import jax
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "reference: compares against a reference implementation")
    config.addinivalue_line("markers", "x64: run this test with jax_enable_x64 on (restored afterwards)")


@pytest.fixture
def x64():
    """float64 for the duration of one test."""
    with jax.enable_x64(True):
        yield


@pytest.fixture(autouse=True)
def _x64_marker(request):
    if request.node.get_closest_marker("x64") is None:
        yield
        return
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="session")
def fixture_models():
    from caliper_jax.loading import load

    return {name: load(name) for name in ("pendulum2", "collide_arm", "gripper_arm", "toy")}
