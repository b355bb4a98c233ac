"""The planners' default start (issue 34, must-show 3): inside the joint limits for every robot of
the registry, so ``plan()`` and ``caliper plan ROBOT --goal ...`` work without ``--start``."""
import numpy as np
import pytest

import robots
from caliper_jax.configuration import default_start, neutral
from caliper_jax.loading import load


@pytest.mark.parametrize("name", robots.names())
def test_default_start_is_inside_the_limits(name):
    model = load(name)
    q = default_start(model)
    lo, hi = np.asarray(model.qpos_lower, np.float64), np.asarray(model.qpos_upper, np.float64)
    assert q.shape == (model.nq,) and q.dtype == np.float64
    assert np.all((q >= lo) & (q <= hi)), (name, np.flatnonzero((q < lo) | (q > hi)))
    n = np.asarray(neutral(model), np.float64)
    inside = (n >= lo) & (n <= hi)
    assert np.array_equal(q[inside], n[inside])         # only the coordinates outside move


def test_panda_neutral_violates_joint_4_and_default_start_fixes_it():
    model = load("panda")
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    assert neutral(model)[3] > hi[3]                     # the neutral pose is outside joint 4's range
    assert default_start(model)[3] == pytest.approx(0.5 * (lo[3] + hi[3]))


@pytest.mark.slow          # ~30-70 s: compiles the panda fast path
def test_caliper_plan_panda_from_the_default_start(capsys):
    from caliper_jax.cli import main

    assert main(["plan", "panda", "--goal", "0.5,0.4,0,-1.8,0,2.2,0.8,0.02", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["success"] and out["start"][3] == pytest.approx(-1.5708, abs=1e-3), out["reason"]
