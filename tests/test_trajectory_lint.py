"""Trajectory lint T001-T007 and the path report: one planted defect per code, clean paths clean."""
import subprocess
import sys

import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from doctors.trajectory import (
    ERROR,
    WARNING,
    Finding,
    LintLimits,
    LintOptions,
    format_report,
    lint_path,
    path_report,
)

T_END, N = 2.0, 201


def _limits(**over):
    base = dict(lower=np.full(3, -2.0), upper=np.full(3, 2.0), vmax=np.full(3, 1.0),
                amax=np.full(3, 5.0), jmax=np.full(3, 50.0))
    for k, (j, v) in over.items():
        base[k] = base[k].copy()
        base[k][j] = v
    return LintLimits(**base)


def _rows(q0=(0.0, 0.5, -0.5), dist=(0.5, -0.3, 0.2)):
    """Quintic rest-to-rest move: max speed 1.875 d/T, acceleration 5.77 d/T^2, jerk 60 d/T^3."""
    t = np.linspace(0.0, T_END, N)
    s = t / T_END
    d = np.asarray(dist)
    pos = 10 * s**3 - 15 * s**4 + 6 * s**5
    vel = (30 * s**2 - 60 * s**3 + 30 * s**4) / T_END
    acc = (60 * s - 180 * s**2 + 120 * s**3) / T_END**2
    q = np.asarray(q0) + pos[:, None] * d
    return t, q, vel[:, None] * d, acc[:, None] * d


def _codes(findings):
    return sorted({f.code for f in findings})


def test_clean_trajectory_has_no_findings():
    t, q, qd, qdd = _rows()
    assert lint_path(t, q, qd, qdd, _limits(), sigma_min=np.full(N, 0.5)) == []
    assert lint_path(t, q, qd, qdd, _limits()) == []


def test_t001_position_limit():
    t, q, qd, qdd = _rows(q0=(1.8, 0.5, -0.5))
    found = lint_path(t, q, qd, qdd, _limits())
    assert _codes(found) == ["T001"]
    (f,) = found
    assert f.severity == ERROR and f.joint == 0 and f.time == pytest.approx(T_END)
    assert f.value == pytest.approx(2.0 - 2.3)


def test_t002_velocity():
    t, q, qd, qdd = _rows()
    found = lint_path(t, q, qd, qdd, _limits(vmax=(1, 0.25)))
    assert _codes(found) == ["T002"]
    assert found[0].joint == 1 and found[0].time == pytest.approx(1.0)
    assert found[0].value == pytest.approx(1.875 * 0.3 / T_END) and found[0].limit == 0.25


def test_t003_acceleration():
    t, q, qd, qdd = _rows()
    found = lint_path(t, q, qd, qdd, _limits(amax=(2, 0.2)))
    assert _codes(found) == ["T003"] and found[0].joint == 2 and found[0].severity == ERROR


def test_t004_near_limit():
    t, q, qd, qdd = _rows(q0=(1.97, 0.5, -0.5), dist=(0.0, -0.3, 0.2))
    found = lint_path(t, q, qd, qdd, _limits())
    assert _codes(found) == ["T004"]
    assert found[0].joint == 0 and found[0].severity == WARNING and found[0].value == 1.0


def test_t004_skipped_when_t001_fires_on_that_joint():
    t, q, qd, qdd = _rows(q0=(2.01, 0.5, -0.5), dist=(0.0, -0.3, 0.2))
    assert _codes(lint_path(t, q, qd, qdd, _limits())) == ["T001"]


def test_t005_detour():
    t, q, qd, qdd = _rows()
    w = 2 * np.pi / T_END
    q[:, 1] = 0.5 + 0.3 * (1 - np.cos(w * t))  # out and back: travel 1.2, net 0
    qd[:, 1] = 0.3 * w * np.sin(w * t)
    qdd[:, 1] = 0.3 * w * w * np.cos(w * t)
    found = lint_path(t, q, qd, qdd, _limits())
    assert _codes(found) == ["T005"]
    assert found[0].joint == 1 and found[0].time == pytest.approx(T_END / 2)  # farthest from the chord
    assert found[0].value == pytest.approx(1.2, rel=1e-3)


def test_t006_jerk():
    t, q, qd, qdd = _rows()
    found = lint_path(t, q, qd, qdd, _limits(jmax=(0, 1.0)))
    assert _codes(found) == ["T006"] and found[0].joint == 0
    assert found[0].value == pytest.approx(60 * 0.5 / T_END**3, rel=2e-2)
    # infinite jerk limits and repeated time stamps are skipped
    assert lint_path(t, q, qd, qdd, _limits(jmax=(0, np.inf))) == []
    t2 = np.repeat(t, 2)
    rep = [np.repeat(x, 2, axis=0) for x in (q, qd, qdd)]
    assert lint_path(t2, *rep, _limits()) == []


def test_t007_one_finding_per_window():
    t, q, qd, qdd = _rows()
    sigma = np.full(N, 0.3)
    sigma[10:30] = np.linspace(0.005, 0.009, 20)
    sigma[150:161] = 1e-4
    sigma[155] = 1e-6
    found = lint_path(t, q, qd, qdd, _limits(), sigma_min=sigma)
    assert _codes(found) == ["T007"] and len(found) == 2
    first, second = found
    assert first.joint is None and first.time == pytest.approx(t[10]) and first.value == pytest.approx(0.005)
    assert (first.t_start, first.t_end) == (pytest.approx(t[10]), pytest.approx(t[29]))
    assert second.time == pytest.approx(t[155]) and second.value == 1e-6
    assert (second.t_start, second.t_end) == (pytest.approx(t[150]), pytest.approx(t[160]))


def test_findings_sorted_by_severity_code_time_and_are_data():
    t, q, qd, qdd = _rows(q0=(1.8, 0.5, -0.5))
    sigma = np.full(N, 0.3)
    sigma[5:8] = 1e-3
    found = lint_path(t, q, qd, qdd, _limits(vmax=(2, 0.05), jmax=(1, 0.1)), sigma_min=sigma)
    assert [f.code for f in found] == ["T001", "T002", "T006", "T007"]
    assert [f.severity for f in found] == [ERROR, ERROR, WARNING, WARNING]
    d = found[0].to_dict()
    assert set(d) >= {"code", "severity", "joint", "time", "value", "limit", "fix", "message"}
    assert all(isinstance(f, Finding) and f.fix and f.message for f in found)


def test_options_and_limits_mapping():
    t, q, qd, qdd = _rows()
    lim = dict(lower=-2.0, upper=2.0, vmax=0.4, amax=5.0)  # scalars broadcast, jmax optional
    assert _codes(lint_path(t, q, qd, qdd, lim)) == ["T002"]
    assert lint_path(t, q, qd, qdd, lim, options=LintOptions(overspeed_ratio=2.0)) == []


def test_bad_input_is_a_clear_error():
    t, q, qd, qdd = _rows()
    with pytest.raises(CaliperError, match="qd"):
        lint_path(t, q, qd[:-1], qdd, _limits())
    q = q.copy()
    q[3, 1] = np.nan
    with pytest.raises(CaliperError, match="q: non-finite value at sample 3"):
        lint_path(t, q, qd, qdd, _limits())
    with pytest.raises(CaliperError, match="times"):
        lint_path(t[::-1], *_rows()[1:], _limits())
    with pytest.raises(CaliperError, match="sigma_min"):
        lint_path(*_rows(), _limits(), sigma_min=np.ones(3))


def test_path_report():
    t, q, qd, qdd = _rows()
    sigma = 0.3 + 0.1 * np.cos(np.linspace(0, np.pi, N))
    manip = sigma**2
    rep = path_report(t, q, qd, qdd, _limits(), manipulability=manip, sigma_min=sigma,
                      joint_names=("a", "b", "c"))
    assert rep.cycle_time == T_END and rep.n_samples == N
    np.testing.assert_allclose(rep.limit_margin, [1.5, 1.5, 1.5])  # each joint comes within 1.5 of a limit
    np.testing.assert_allclose(rep.velocity_utilisation, 1.875 * np.array([0.5, 0.3, 0.2]) / T_END, rtol=1e-4)
    acc_peak = 5.7735 * np.array([0.5, 0.3, 0.2]) / T_END**2
    np.testing.assert_allclose(rep.acceleration_utilisation, acc_peak / 5.0, rtol=1e-2)
    assert rep.sigma_min.min == pytest.approx(0.2) and rep.sigma_min.time_of_min == pytest.approx(T_END)
    assert rep.manipulability.time_of_min == pytest.approx(T_END)
    d = rep.to_dict()
    assert d["joints"][1]["name"] == "b" and d["sigma_min"]["min"] == pytest.approx(0.2)
    text = format_report(rep, lint_path(t, q, qd, qdd, _limits(vmax=(0, 0.1))))
    assert "cycle time" in text and "[T002]" in text and "1 error(s), 0 warning(s)" in text
    assert path_report(t, q, qd, qdd, _limits()).sigma_min is None


def test_lint_does_not_import_jax():
    code = "import sys, doctors.trajectory; assert 'jax' not in sys.modules, 'jax imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_motion_outputs_lint_clean():
    """Our own planners' rows pass the lint; the bang-bang TOPP trips T006 unless jmax is infinite."""
    import jax

    from caliper_jax.motion import MotionLimits, move_j, retime_waypoints, topp_piecewise_linear

    # float32 planners (the user's precision): their rows must not trip the lint's tolerances
    lim = MotionLimits.from_arrays([-3.0, -3.0, -3.0], [3.0, 3.0, 3.0], [1.0, 2.0, 0.5])
    wp = np.array([[0.0, 0.0, 0.0], [1.0, -1.0, 0.5], [1.3, -0.6, 0.9]])
    for traj in (jax.jit(move_j)(wp[0], wp[1], lim), jax.jit(retime_waypoints)(wp, lim)):
        rows = [np.asarray(x) for x in traj.sample_uniform(0.005)]
        assert rows[1].dtype == np.float32
        assert lint_path(*rows, lim) == []
    rows = [np.asarray(x) for x in jax.jit(topp_piecewise_linear)(wp, lim).sample_uniform(0.005)]
    assert _codes(lint_path(*rows, lim)) == ["T006"]
    assert lint_path(*rows, lim._replace(jmax=np.full(3, np.inf))) == []
