"""Least squares for calibration: the pose-error linearisation, the minimum-norm Gauss-Newton step,
identifiability, and :func:`least_squares`, which runs the project's one Levenberg-Marquardt
(:mod:`caliper_jax.least_squares`, host loop) on a jitted residual/Jacobian function.

Minimises 0.5 |r(x)|^2 over a flat parameter vector x. Each step drops singular values of J
below ``rcond * s_max``, so parameters the data cannot see (zero or dependent columns) are left
where they started: the answer is the minimum-norm correction from x0 (the nominal model) within
the identifiable subspace.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.spatial import log6


class LSQResult(NamedTuple):
    x: jnp.ndarray                 # (p,) solution
    cost: jnp.ndarray              # 0.5 |r|^2 at x
    cost_initial: jnp.ndarray
    iterations: jnp.ndarray        # steps tried (accepted or not)
    converged: jnp.ndarray         # stopped on xtol / zero cost rather than the budget
    jacobian: jnp.ndarray          # (m, p) at x
    residual: jnp.ndarray          # (m,) at x
    residual_initial: jnp.ndarray  # (m,) at x0


RCOND = 1e4  # singular values below RCOND * eps * s_max count as zero


def identifiable(J, rcond=None):
    """Per parameter: True where the data determine it on its own (its unit vector lies in the
    row space of J to 1e-6). Other parameters only enter through combinations."""
    _, s, Vt = jnp.linalg.svd(J, full_matrices=False)
    if rcond is None:
        rcond = RCOND * jnp.finfo(J.dtype).eps
    keep = s > rcond * s[0]
    Vr = jnp.where(keep[:, None], Vt, 0.0)
    return jnp.sum(Vr * Vr, axis=0) > 1.0 - 1e-6


def rank(J, rcond=None):
    s = jnp.linalg.svd(J, compute_uv=False)
    if rcond is None:
        rcond = RCOND * jnp.finfo(J.dtype).eps
    return jnp.sum(s > rcond * s[0])


def gauss_newton_step(J, r, rcond=None):
    """The minimum-norm Gauss-Newton step dx = -J^+ r (SVD, values below rcond * s_max
    dropped): exact in one step when r is affine in x."""
    U, s, Vt = jnp.linalg.svd(J, full_matrices=False)
    if rcond is None:
        rcond = RCOND * jnp.finfo(J.dtype).eps
    keep = s > rcond * s[0]
    return -Vt.T @ (jnp.where(keep, 1.0 / jnp.where(keep, s, 1.0), 0.0) * (U.T @ r))


def least_squares(residual, x0, *, max_iters: int = 50, xtol: float = 1e-13, mu0: float = 1e-3,
                  rcond=None, linearize=None) -> LSQResult:
    """Levenberg-Marquardt (:func:`caliper_jax.least_squares.levenberg_marquardt`) on ``residual``
    (x (p,) -> r (m,)) from ``x0``, in ``x0``'s dtype.

    ``linearize`` (x -> (r, J)), when given, supplies the residual and a Jacobian together (e.g. a
    first-order one that is cheaper to compile than ``jacfwd`` of the residual; pass it jitted);
    the default is ``jit((residual(x), jax.jacfwd(residual)(x)))``. Stops when a step is below
    ``xtol`` (max norm), the relative cost decrease is below the dtype's eps^2, or after
    ``max_iters`` accepted steps. The damping starts at ``mu0 s_max^2`` (``s_max``: the largest
    singular value of J at ``x0``); singular values below ``rcond * s_max`` (default
    ``RCOND * eps`` of the dtype) are dropped from every step."""
    from caliper_jax.least_squares import levenberg_marquardt

    if linearize is None:
        linearize = jax.jit(lambda x: (residual(x), jax.jacfwd(residual)(x)))
    x0 = jnp.asarray(x0)
    dtype = x0.dtype

    def evaluate(x):
        r, J = linearize(jnp.asarray(x, dtype))
        r, J = np.asarray(r, np.float64), np.asarray(J, np.float64)
        return r, J, (r, J)

    eps = float(jnp.finfo(dtype).eps)
    r0, J0, _ = evaluate(x0)
    s_max = float(np.linalg.norm(J0, 2)) if J0.size else 0.0
    out = levenberg_marquardt(evaluate, np.asarray(x0, np.float64), iterations=max_iters, tol_rel=eps ** 2,
                              step_tol=xtol, lam0=max(mu0 * s_max ** 2, np.finfo(np.float64).tiny),
                              rcond=RCOND * eps if rcond is None else float(rcond),
                              diverged="calibration: non-finite residuals or Jacobian")
    r, J = out.aux
    cast = lambda a: jnp.asarray(a, dtype)
    return LSQResult(x=cast(out.z), cost=cast(out.cost[-1]), cost_initial=cast(out.cost[0]),
                     iterations=out.iterations, converged=out.converged, jacobian=cast(J), residual=cast(r),
                     residual_initial=cast(r0))


def pose_twist_linearization(pose_fn, x, R_meas, p_meas, weights):
    """Residuals and first-order Jacobian of measured poses against a parametrised FK.

    ``pose_fn(x) -> (R (N, 3, 3), p (N, 3))``. Residual k is the body-frame error twist
    log6(T_k(x)^-1 T_meas_k) (6,), [v; w]; its Jacobian is taken to first order as minus the
    body twist of dT_k/dx, [R^T dp; vee(R^T dR)] -- for joint offsets exactly -J_local -- with
    dT/dx by ``jax.jacfwd`` through the FK alone (not through log6). Returns (r (6N,), J (6N, P)),
    rows scaled by ``weights`` (6,)."""
    (dR, dp), (R, p) = jax.jacfwd(lambda y: (pose_fn(y),) * 2, has_aux=True)(x)
    Rt = jnp.swapaxes(R, -1, -2)
    e = jax.vmap(log6)(Rt @ R_meas, (Rt @ (p_meas - p)[..., None])[..., 0])
    A = jnp.einsum("nij,njkq->nikq", Rt, dR)                       # R^T dR/dx, skew per column
    w = jnp.stack([A[:, 2, 1], A[:, 0, 2], A[:, 1, 0]], axis=1)      # (N, 3, P)
    v = jnp.einsum("nij,njq->niq", Rt, dp)
    J = -jnp.concatenate([v, w], axis=1) * weights[None, :, None]
    return (e * weights).reshape(-1), J.reshape(-1, J.shape[-1])


__all__ = ["RCOND", "pose_twist_linearization", "LSQResult", "gauss_newton_step", "least_squares",
           "identifiable", "rank"]
