"""Levenberg-Marquardt for residuals evaluated from the host (one implementation, used by
:func:`caliper_jax.trajopt.trajopt_contact` and :func:`caliper_jax.sysid.identify`).

Both callers evaluate residuals and their Jacobian through chunked, jitted MJX rollouts driven from
Python (the Jacobian of a long contact rollout does not fit in one traced program, and each trial
step needs its own rollout), so the outer loop runs in NumPy.

The step is the damped Gauss-Newton step ``p = -(J^T J + lam I)^-1 J^T r``, taken from one SVD of
``J`` per accepted point (every damping tried there reuses it; no normal equations, so the
conditioning is that of ``J``, not its square). A trial is judged as a trust region: ``rho`` = actual
cost decrease / the decrease the linear model predicts, ``0.5 (|r|^2 - |r + J p|^2)``. It is kept if
``rho >= 0.01``; ``lam`` then falls 3.5x if ``rho > 0.99`` (the model is trusted) and stays
otherwise; a rejected trial raises ``lam`` 4x. ``lam`` starts at ``lam0`` (absolute, in the units of
``J^T J``). It stops on a kept step with a relative cost decrease under ``tol_rel`` or a max-norm
under ``step_tol``; on a rejected trial already under ``step_tol`` (no smaller step can matter);
or after ``iterations`` kept steps.

These are the rules of optimistix's ``LevenbergMarquardt`` (``DampedNewtonDescent`` with
``ClassicalTrustRegion``). The previous rule here (Marquardt's scaled damping ``lam diag(J^T J)``
from 1e-2, any decrease accepted, ``lam`` /3 after each, at most 8 damping increases) failed twice:

- On a narrow curved valley (Rosenbrock, a = 100, start near x1 = 0) the scaled damping barely
  damps the weakly seen coordinate, the step first grows with ``lam``, and the 8 tries ran out:
  it reported convergence at the start (cost 5e3). Now: the truth (tests/test_least_squares.py).
- On the push through contact (benchmarks/bench_least_squares.py, 3 episodes) it ended at 4.5%
  parameter error, cost 2.1. Measured: that is not a kink but a smooth trough (gradient 7e-9,
  model ratio 1.0) next to a cliff of the contact loss (at mass 0.19 the cost jumps 2.1 -> 0.04
  between friction 0.480 and 0.485: a discrete contact event of the rollout switching), reached
  after a nearly undamped first step moved the mass 0.14 -> 0.45 kg. On such a loss any local
  method picks its trough by its path. Of the twelve variants tried on it (old / ratio
  acceptance, scaled / identity damping, ``lam0`` 1e-2, 1, 1e2), two reached the truth: identity
  damping from 1 (either acceptance; the rule here, 6.8e-14 in 7 steps) and scaled from 1e2 with
  the old acceptance. So the fix on ``push`` is a path, not a guarantee: multiple starts remain
  the remedy for a loss with cliffs.

Kept as ours rather than calling optimistix because optimistix traces the residual function into
its ``while_loop`` (the whole dataset in one program, and a Jacobian at every trial) while ours
evaluates blocks of segments, memory flat in the dataset size, a Jacobian only at kept points; with
the same rules both reach the planted truth on both benchmark problems (benchmarks/README.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from caliper_jax.errors import CaliperError

ACCEPT, TRUST = 0.01, 0.99          # rho cut-offs: keep the step / shrink the damping
DOWN, UP = 3.5, 4.0                 # damping factors after a trusted / a rejected step
RCOND = 1e4 * np.finfo(np.float64).eps   # relative singular-value cut of the step


@dataclass
class LMResult:
    """``z`` (N,): the solution; ``cost``: 0.5 |r|^2 after each accepted step (the start first);
    ``iterations``: accepted steps; ``trials``: residual evaluations after the start (accepted or
    not); ``converged``: stopped by a tolerance (not by the iteration cap); ``aux``: what
    ``evaluate`` returned with the solution."""

    z: np.ndarray
    cost: list
    iterations: int
    trials: int
    converged: bool
    aux: Any


def damped_step(U, s, Vt, r, lam, rcond=RCOND):
    """``-(J^T J + lam I)^-1 J^T r`` (N,) from the thin SVD ``J = U diag(s) Vt`` (M, N), singular
    values below ``rcond * s_max`` taken as zero: directions the data do not see are not moved."""
    keep = s > rcond * (s[0] if len(s) else 0.0)
    filt = np.where(keep, s / np.where(keep, s * s + lam, 1.0), 0.0)
    return -Vt.T @ (filt * (U.T @ r))


def levenberg_marquardt(evaluate: Callable, z0, *, iterations: int, tol_rel: float, step_tol: float,
                        diverged: str, lam0: float = 1.0, rcond: float = RCOND) -> LMResult:
    """Minimise ``0.5 |r(z)|^2`` from ``z0`` (N,). ``evaluate(z)`` returns ``(r (M,), J (M, N), aux)``;
    a non-finite residual or Jacobian at an accepted point is a :class:`CaliperError` with the
    message ``diverged`` (non-finite trial points are rejected). ``rcond``: relative singular-value
    cut of every step (raise it for residuals computed in float32)."""
    z = np.asarray(z0, np.float64).reshape(-1)
    r, J, aux = evaluate(z)
    cost = [0.5 * float(r @ r)]
    lam, converged, trials, it = float(lam0), False, 0, 0
    while it < int(iterations) and not converged:
        if not (np.all(np.isfinite(J)) and np.all(np.isfinite(r))):
            raise CaliperError(diverged)
        U, s, Vt = np.linalg.svd(J, full_matrices=False)
        while True:
            step = damped_step(U, s, Vt, r, lam, rcond)
            small = float(np.max(np.abs(step), initial=0.0)) <= step_tol
            lin = r + J @ step
            predicted = cost[-1] - 0.5 * float(lin @ lin)
            out = evaluate(z + step)
            trials += 1
            c_try = 0.5 * float(out[0] @ out[0])
            rho = (cost[-1] - c_try) / predicted if predicted > 0 and np.isfinite(c_try) else -np.inf
            if rho >= ACCEPT:
                break
            lam *= UP
            if small:
                converged = True
                break
        if converged:
            break
        it += 1
        rel = (cost[-1] - c_try) / max(cost[-1], 1e-300)
        z, (r, J, aux) = z + step, out
        cost.append(c_try)
        if rho > TRUST:
            lam = max(lam / DOWN, 1e-300)
        converged = rel < tol_rel or small
    return LMResult(z=z, cost=cost, iterations=it, trials=trials, converged=converged, aux=aux)
