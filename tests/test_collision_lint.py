"""T008 (path in collision) and T009 (near miss) on planted defects, in the trajectory lint's
finding format."""
import numpy as np
import pytest

from caliper_jax.collision import box, build_collision_model, ground, lint_collision
from caliper_jax.loading import load
from doctors.trajectory import Finding, lint_path, sort_findings


@pytest.fixture(scope="module")
def arm():
    return load("collide_arm", dtype=np.float32)      # the user's default precision


def _sweep(qa, qb, n):
    s = np.linspace(0.0, 1.0, n)[:, None]
    return np.asarray(qa) * (1 - s) + np.asarray(qb) * s


def test_t008_one_finding_per_collision_window(arm):
    # the straight swing from -1 to 1 rad passes the vertical, where l3 goes through the box;
    # swinging back makes a second, separate window
    cm = build_collision_model(arm, [box([0.0, 0.0, 0.8], [0.06, 0.3, 0.06]), ground(-0.1)])
    there = _sweep([-1, 0, 0], [1, 0, 0], 16)
    q = np.concatenate([there, there[::-1][1:]])
    t = np.arange(q.shape[0]) * (1 / 15)
    findings = lint_collision(arm, cm, t, q)
    t008 = [f for f in findings if f.code == "T008"]
    assert len(t008) == 2 and all(isinstance(f, Finding) for f in t008)
    first, second = t008
    assert first.severity == "Error" and first.joint is None and first.limit == 0.0
    assert first.value < 0 and first.t_start <= first.time <= first.t_end < second.t_start
    assert first.time == pytest.approx(0.5, abs=0.034)             # deepest near the vertical
    assert "l3" in first.message and "box" in first.message
    assert set(first.to_dict()) == set(Finding.__dataclass_fields__)
    # T009 never repeats a window that collides
    assert not any(f.code == "T009" and f.t_start <= first.time <= f.t_end for f in findings)


def test_t009_near_miss_and_clearance_zero_disables(arm):
    # the box's underside is 1 cm above the straight arm's top face
    cm = build_collision_model(arm, [box([0.0, 0.0, 0.97], [0.06, 0.3, 0.06]), ground(-0.1)])
    q = _sweep([-0.0666, 0, 0], [0.0666, 0, 0], 3)
    q = np.concatenate([_sweep([-0.4, 0, 0], [-0.1, 0, 0], 13), q, _sweep([0.1, 0, 0], [0.4, 0, 0], 13)])
    t = q[:, 0] + 0.4
    findings = lint_collision(arm, cm, t, q, clearance=0.02)
    assert [f.code for f in findings] == ["T009"]
    near = findings[0]
    assert near.severity == "Warning" and near.limit == 0.02
    # closest when the top corner of l3 is highest: tilt atan(0.06 / 0.9), gap 0.91 - |(0.9, 0.06)|
    assert near.value == pytest.approx(0.91 - np.hypot(0.9, 0.06), abs=2e-6)
    assert abs(near.time - 0.4) == pytest.approx(np.arctan2(0.06, 0.9), abs=1e-4)
    assert near.t_start < 0.4 < near.t_end
    assert lint_collision(arm, cm, t, q, clearance=0.0) == []
    assert lint_collision(arm, cm, t, q, clearance=0.005) == []


def test_merges_with_the_kinematic_lint(arm):
    cm = build_collision_model(arm, [box([0.0, 0.0, 0.97], [0.06, 0.3, 0.06]), ground(-0.1)])
    t = np.linspace(0.0, 0.8, 29)
    q = _sweep([-0.4, 0, 0], [0.4, 0, 0], 29)
    qd = np.gradient(q, t, axis=0)
    qdd = np.gradient(qd, t, axis=0)
    limits = {"lower": np.full(3, -3.3), "upper": np.full(3, 3.3), "vmax": np.full(3, 5.0),
              "amax": np.full(3, 25.0)}
    merged = sort_findings(lint_path(t, q, qd, qdd, limits) + lint_collision(arm, cm, t, q))
    assert [f.code for f in merged] == ["T009"]


def test_bad_input_names_the_field(arm):
    from caliper_jax.errors import CaliperError

    cm = build_collision_model(arm, [ground(-0.1)])
    t, q = np.linspace(0, 1, 4), np.zeros((4, 3))
    with pytest.raises(CaliperError, match="q: expected shape"):
        lint_collision(arm, cm, t, q[:3])
    with pytest.raises(CaliperError, match="q: expected"):
        lint_collision(arm, cm, t, np.zeros((4, 2)))
    with pytest.raises(CaliperError, match="clearance"):
        lint_collision(arm, cm, t, q, clearance=-0.1)
    assert lint_collision(arm, cm, t[:0], q[:0]) == []
