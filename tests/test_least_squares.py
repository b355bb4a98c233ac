"""caliper_jax.least_squares: the one host-driven Levenberg-Marquardt (NumPy problems, milliseconds).

The MJX callers are covered by tests/test_sysid.py and tests/test_trajopt_contact.py."""
from __future__ import annotations

import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from caliper_jax.least_squares import damped_step, levenberg_marquardt

KW = {"iterations": 200, "tol_rel": 1e-15, "step_tol": 1e-13, "diverged": "planted: diverged"}


def _rosenbrock(a):
    """Residuals (a (x2 - x1^2), 1 - x1): a valley of width ~1/a along x2 = x1^2, truth (1, 1)."""
    def evaluate(x):
        r = np.array([a * (x[1] - x[0] ** 2), 1.0 - x[0]])
        J = np.array([[-2.0 * a * x[0], a], [-1.0, 0.0]])
        return r, J, "aux"
    return evaluate


@pytest.mark.parametrize("start", [(-0.01, -1.0), (0.02, -1.0), (-1.5, 2.0)])
def test_narrow_valley_reaches_planted_truth(start):
    """Below the floor of a narrow curved valley (a = 100) near x1 = 0, J^T J barely sees x1: the
    previous rule (Marquardt's scaled damping, any decrease accepted, at most 8 damping increases)
    found no decrease in its 8 tries and reported convergence at the start (cost 5e3). The trust
    region keeps raising the damping until the step is below step_tol, and walks the valley."""
    res = levenberg_marquardt(_rosenbrock(100.0), np.array(start), **KW)
    assert res.converged
    np.testing.assert_allclose(res.z, [1.0, 1.0], atol=1e-9)
    assert res.cost[-1] < 1e-20 and res.aux == "aux"
    assert np.all(np.diff(res.cost) < 0)                 # every accepted step lowers the cost
    assert res.trials >= res.iterations == len(res.cost) - 1


def test_damped_step_is_the_damped_gauss_newton_step():
    rng = np.random.default_rng(0)
    J, r = rng.normal(size=(7, 3)), rng.normal(size=7)
    J[:, 2] *= 1e-4                                       # badly scaled column
    U, s, Vt = np.linalg.svd(J, full_matrices=False)
    for lam in (0.0, 1e-3, 1.0, 1e3):
        want = np.linalg.solve(J.T @ J + lam * np.eye(3), -J.T @ r)
        np.testing.assert_allclose(damped_step(U, s, Vt, r, lam), want, rtol=1e-6)


def test_unseen_parameter_stays_at_its_start():
    """A parameter with a zero Jacobian column (the data do not see it) must not move, even as the
    damping falls: the step drops singular values below rcond * s_max."""
    def evaluate(x):
        return np.array([x[0] - 2.0, 3.0 * (x[0] - 2.0)]), np.array([[1.0, 0.0], [3.0, 0.0]]), None
    res = levenberg_marquardt(evaluate, np.array([0.0, 0.7]), **KW)
    assert res.converged and res.z[1] == 0.7
    np.testing.assert_allclose(res.z[0], 2.0, atol=1e-12)


def test_non_finite_trial_is_rejected_and_non_finite_start_is_an_error():
    """r = log(x) from x = 100: the Gauss-Newton step lands at x < 0 (NaN), which must be rejected
    (damped, retried) rather than accepted or raised."""
    def evaluate(x):
        with np.errstate(invalid="ignore"):
            return np.log(x), np.diag(1.0 / x), None
    res = levenberg_marquardt(evaluate, np.array([100.0]), **KW)
    assert res.converged and res.trials > res.iterations
    np.testing.assert_allclose(res.z, [1.0], atol=1e-9)
    with pytest.raises(CaliperError, match="planted: diverged"):
        levenberg_marquardt(evaluate, np.array([-1.0]), **KW)


def test_iteration_cap_and_zero_iterations():
    ev = _rosenbrock(100.0)
    res = levenberg_marquardt(ev, np.array([-1.5, 2.0]), **{**KW, "iterations": 3})
    assert res.iterations == 3 and not res.converged and len(res.cost) == 4
    res = levenberg_marquardt(ev, np.array([-1.5, 2.0]), **{**KW, "iterations": 0})
    assert res.iterations == 0 and res.trials == 0 and not res.converged
    np.testing.assert_array_equal(res.z, [-1.5, 2.0])
