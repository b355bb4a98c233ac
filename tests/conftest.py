"""Shared fixtures. float64 is enabled for the session (reference tests need it); float32 tests
cast explicitly. Compiled functions are cached per robot so each compiles once."""
import jax
import pytest

jax.config.update("jax_enable_x64", True)


def pytest_configure(config):
    config.addinivalue_line("markers", "reference: compares against a reference implementation")


@pytest.fixture(scope="session")
def fixture_models():
    from caliper_jax.loading import load

    return {name: load(name) for name in ("pendulum2", "collide_arm", "gripper_arm", "toy")}
