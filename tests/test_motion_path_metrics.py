"""sigma_min / manipulability along a path from the model's Jacobians, and the model-aware lint
(T007 through the UR5 wrist singularity, clean away from it)."""
import numpy as np
import pytest

from caliper_jax import api
from caliper_jax.errors import CaliperError
from caliper_jax.loading import load
from caliper_jax.motion import MotionLimits, lint_model_path, move_j, path_metrics, sample_at

Q0 = np.array([0.3, -1.2, 1.0, -0.5, 0.4, 0.4])
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def ur5():
    return load("ur5", dtype=np.float32)


def test_sigma_min_and_manipulability_match_numpy_svd(ur5):
    rng = np.random.default_rng(5)
    q = rng.uniform(-2.0, 2.0, (3, 7, 6))
    m = path_metrics(ur5, q, frame="tool0")
    assert m.sigma_min.shape == (3, 7) and m.frame == "tool0"
    s = np.linalg.svd(api.jacobian(ur5, q, "tool0"), compute_uv=False)
    # float32 singular values are good to a few eps of the largest (measured 2e-7 abs = 2 eps);
    # the manipulability's error is that times the product of the others
    smax = float(s.max())
    np.testing.assert_allclose(m.sigma_min, s[..., -1], rtol=0, atol=16 * EPS32 * smax)
    np.testing.assert_allclose(m.manipulability, np.prod(s, axis=-1), rtol=0,
                               atol=16 * EPS32 * smax * np.prod(s[..., :-1], axis=-1).max() * s.shape[-1])
    assert path_metrics(ur5, Q0).frame == "tool0"          # the default tool frame
    for bad in (np.zeros(5), np.full(6, np.nan), np.zeros((0, 6))):
        with pytest.raises(CaliperError, match="q"):
            path_metrics(ur5, bad)


def test_t007_fires_through_the_wrist_singularity_only(ur5):
    lim = MotionLimits.from_model(ur5)
    through = Q0.copy()
    through[4] = -0.4                                        # wrist_2 crosses 0: singular
    traj = move_j(Q0, through, lim)
    rows = sample_at(traj, np.linspace(0.0, float(traj.duration), 100))
    report, findings, metrics = lint_model_path(ur5, *rows)
    t007 = [f for f in findings if f.code == "T007"]
    assert len(t007) == 1 and t007[0].joint is None
    f = t007[0]
    assert f.value == pytest.approx(metrics.sigma_min.min()) and f.value < 1e-2
    assert f.t_start <= f.time <= f.t_end
    assert report.sigma_min.min == pytest.approx(f.value) and report.manipulability.min < 1e-3
    assert report.joint_names[4] == "wrist_2_joint"
    away = Q0.copy()
    away[4] = 1.2
    times = np.linspace(0.0, float(move_j(Q0, away, lim).duration), 100)
    rows = sample_at(move_j(Q0, away, lim), times)
    report, findings, metrics = lint_model_path(ur5, *rows)
    assert findings == [] and metrics.sigma_min.min() > 1e-2
