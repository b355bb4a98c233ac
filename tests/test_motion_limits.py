"""MotionLimits: defaults, validation and reading a model."""
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from caliper_jax.motion import MotionLimits


def test_defaults_from_velocity():
    lim = MotionLimits.from_arrays([-1, -2, -3], [1, 2, 3], [2.0, 0.0, np.nan])
    np.testing.assert_array_equal(lim.vmax, [2.0, 1.0, 1.0])
    np.testing.assert_array_equal(lim.amax, [10.0, 5.0, 5.0])
    np.testing.assert_array_equal(lim.jmax, [100.0, 50.0, 50.0])
    assert lim.ndof == 3


def test_defaults_when_velocity_absent_and_negative_or_infinite():
    lim = MotionLimits.from_arrays([-1, -1], [1, 1])
    np.testing.assert_array_equal(lim.vmax, [1.0, 1.0])
    lim = MotionLimits.from_arrays([-1, -1], [1, 1], [-3.0, np.inf])
    np.testing.assert_array_equal(lim.vmax, [1.0, 1.0])


def test_explicit_acceleration_and_jerk():
    lim = MotionLimits.from_arrays([-1], [1], [2.0], acceleration=[3.0], jerk=[7.0])
    assert lim.amax[0] == 3.0 and lim.jmax[0] == 7.0
    lim = MotionLimits.from_arrays([-1], [1], [2.0], acceleration=[3.0])
    assert lim.jmax[0] == 30.0


@pytest.mark.parametrize("field, kwargs", [
    ("amax[1]", dict(acceleration=[1.0, -1.0])),
    ("amax[0]", dict(acceleration=[np.inf, 1.0])),
    ("jmax[1]", dict(jerk=[1.0, 0.0])),
    ("jmax[0]", dict(jerk=[np.nan, 1.0])),
])
def test_invalid_limits_name_field_and_dof(field, kwargs):
    with pytest.raises(CaliperError, match=rf"MotionLimits\.{field.replace('[', '.').replace(']', '.')}"):
        MotionLimits.from_arrays([-1, -1], [1, 1], [1.0, 1.0], **kwargs)


def test_invalid_shapes_and_bounds():
    with pytest.raises(CaliperError, match="upper"):
        MotionLimits.from_arrays([-1, -1], [1, 1, 1])
    with pytest.raises(CaliperError, match="lower.1. .* exceeds upper"):
        MotionLimits.from_arrays([-1, 2], [1, 1])
    with pytest.raises(CaliperError, match="lower.0. is NaN"):
        MotionLimits.from_arrays([np.nan, 0], [1, 1])


def test_unbounded_joints_allowed():
    lim = MotionLimits.from_arrays([-np.inf], [np.inf], [3.0])
    assert np.isinf(lim.lower[0]) and lim.vmax[0] == 3.0


def test_from_model_stand_in():
    model = SimpleNamespace(nq=2, nv=2, qpos_lower=np.array([-3.14, -1.0]),
                            qpos_upper=np.array([3.14, 1.0]), dof_velocity_limit=np.array([10.0, 0.0]))
    lim = MotionLimits.from_model(model)
    np.testing.assert_array_equal(lim.lower, [-3.14, -1.0])
    np.testing.assert_array_equal(lim.vmax, [10.0, 1.0])
    np.testing.assert_array_equal(lim.amax, [50.0, 5.0])
    np.testing.assert_array_equal(lim.jmax, [500.0, 50.0])


def test_from_model_requires_nq_equal_nv():
    model = SimpleNamespace(nq=7, nv=6, qpos_lower=np.zeros(7), qpos_upper=np.ones(7),
                            dof_velocity_limit=np.ones(6))
    with pytest.raises(CaliperError, match="nq == nv"):
        MotionLimits.from_model(model)


def test_from_model_checks_array_lengths():
    model = SimpleNamespace(nq=2, nv=2, qpos_lower=np.zeros(2), qpos_upper=np.ones(2),
                            dof_velocity_limit=np.ones(3))
    with pytest.raises(CaliperError, match="dof_velocity_limit"):
        MotionLimits.from_model(model)


def test_is_a_pytree():
    lim = MotionLimits.from_arrays([-1, -1], [1, 1], [1.0, 2.0])
    leaves = jax.tree_util.tree_leaves(lim)
    assert len(leaves) == 5
    doubled = jax.tree_util.tree_map(lambda x: 2 * x, lim)
    assert isinstance(doubled, MotionLimits) and doubled.vmax[1] == 4.0
    batched = jax.vmap(lambda l: l.vmax.sum())(jax.tree_util.tree_map(lambda x: np.stack([x, x]), lim))
    assert batched.shape == (2,)


def test_from_model_on_a_fixture_robot():
    from caliper_jax.loading import load

    model = load("gripper_arm")
    lim = MotionLimits.from_model(model)
    np.testing.assert_allclose(lim.vmax, [5.0, 5.0, 0.5])
    np.testing.assert_allclose(lim.amax, [25.0, 25.0, 2.5])
    np.testing.assert_allclose(lim.upper, [1.5, 1.5, 0.04], rtol=1e-6)
