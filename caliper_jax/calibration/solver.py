"""A small damped Gauss-Newton (Levenberg-Marquardt) least-squares solver in pure JAX.

Minimises 0.5 |r(x)|^2 over a flat parameter vector x, with the exact Jacobian from
``jax.jacfwd``. Each step is the SVD-filtered damped solution
dx = -V diag(s / (s^2 + mu s_max^2)) U^T r, singular values below ``rcond * s_max`` dropped, so
parameters the data cannot see (zero or dependent columns) are left where they started: the
answer is the minimum-norm correction from x0 (the nominal model) within the identifiable
subspace. mu shrinks 10x after a step that lowers the cost and grows 10x after one that does not
(the step is then rejected). Stops when an accepted step is below ``xtol * (1 + |x|)``, the cost
is exactly 0, or after ``max_iters`` steps. Jittable (``lax.while_loop``).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

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
    """Levenberg-Marquardt on ``residual`` (x (p,) -> r (m,)) from ``x0``.

    ``linearize`` (x -> (r, J)), when given, supplies the residual and a Jacobian together
    (e.g. a first-order one that is cheaper to compile than ``jacfwd`` of the residual); the
    default is ``(residual(x), jax.jacfwd(residual)(x))``. Either is traced once (the first pass
    evaluates x0 with a zero step), which halves the compiled program."""
    if linearize is None:
        linearize = lambda x: (residual(x), jax.jacfwd(residual)(x))
    x0 = jnp.asarray(x0)
    dtype = x0.dtype
    eps = jnp.finfo(dtype).eps
    if rcond is None:
        rcond = RCOND * eps
    m = jax.eval_shape(linearize, x0)[0].shape[0]

    def cost_of(r):
        c = 0.5 * jnp.sum(r * r)
        return jnp.where(jnp.isfinite(c), c, jnp.inf)

    def cond(state):
        it, done = state[5], state[6]
        return (it <= max_iters) & ~done

    def body(state):
        x, r, J, c, mu, it, _, r0 = state
        fresh = it == 0
        U, s, Vt = jnp.linalg.svd(J, full_matrices=False)
        s0 = jnp.maximum(s[0], jnp.finfo(dtype).tiny)
        filt = jnp.where(s > rcond * s0, s / (s * s + mu * s0 * s0), 0.0)
        dx = jnp.where(fresh, 0.0, -Vt.T @ (filt * (U.T @ r)))
        x_new = x + dx
        r_new, J_new = linearize(x_new)
        c_new = cost_of(r_new)
        accept = fresh | (c_new < c)
        x, r, J, c = (jnp.where(accept, a, b) for a, b in ((x_new, x), (r_new, r), (J_new, J), (c_new, c)))
        mu = jnp.where(accept, jnp.maximum(mu * 0.1, eps * eps), jnp.minimum(mu * 10.0, 1e16))
        mu = jnp.where(fresh, mu0, mu)
        small = jnp.linalg.norm(dx) <= xtol * (1.0 + jnp.linalg.norm(x))
        done = (~fresh & accept & small) | (c <= 0.0) | (~fresh & ~accept & small & (mu > 1e8))
        return x, r, J, c, mu, it + 1, done, jnp.where(fresh, r_new, r0)

    zeros_r = jnp.zeros(m, dtype)
    state = (x0, zeros_r, jnp.zeros((m, x0.shape[0]), dtype), jnp.asarray(jnp.inf, dtype),
             jnp.asarray(mu0, dtype), jnp.zeros((), jnp.int32), jnp.zeros((), bool), zeros_r)
    x, r, J, c, _, it, done, r0 = jax.lax.while_loop(cond, body, state)
    return LSQResult(x=x, cost=c, cost_initial=cost_of(r0), iterations=jnp.maximum(it - 1, 0), converged=done,
                     jacobian=J, residual=r, residual_initial=r0)


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
