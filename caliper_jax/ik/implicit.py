"""Differentiable IK: implicit-function derivatives of the converged solution.

The forward pass is ``numerical.solve`` (restarts, LM, active set: nothing changes). The loop
itself is never differentiated; a ``jax.custom_jvp`` supplies the derivative of q* from the
optimality conditions at the solution, so ``jax.jvp`` / ``jax.jacfwd`` and (by JAX's transposition
of the linear rule) ``jax.grad`` / ``jax.jacrev`` all work, under ``jit`` and ``vmap``.

At a converged solve the weighted residual r(q, theta) = W e(q, theta) is zero (|e| <= tol), so
the normal equations of min |r|^2 / 2 reduce, to first order, to the residual equation
r(q*(theta), theta) = 0 (the curvature terms sum r_i d2 r_i vanish with r). Differentiating,
with dr/dq = -W J at e = 0 (J the LOCAL frame Jacobian, as in the solve):

    W J dq* = dr/dtheta dtheta
    dq*     = (W J)^T ((W J)(W J)^T + lambda^2 I)^-1 dr/dtheta dtheta

the regularised (minimum-norm) solution: exact for a non-redundant arm at a regular configuration
(lambda^2 is the solver's floor, 1e-10 in float64), the minimum-norm joint motion for a redundant
one (the solution set is a manifold there; the solve's own choice along it is not differentiable),
and finite at a singular configuration, where the manipulability gate of ``numerical.damping``
switches lambda^2 up to ``opts.damping`` (1e-3). theta is anything the residual depends on: the
target ``target_T`` (4, 4) and every float leaf of the Model (joint placements ``jnt_p`` /
``jnt_R``, axes, frame offsets).

Columns of J are zeroed for locked joints (their q is the seed: zero derivative) and for joints
resting on a limit (the clamp is active: zero derivative in that coordinate; the other joints take
up the motion -- one-sided, as a clamp is). An unconverged solve has no optimality condition to
differentiate: its tangent is exactly zero and ``success`` (the flag) is False; the residual
derivatives are then taken at the pose actually reached, so their coefficients are finite and no
NaN reaches a cotangent either.
"""
from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from caliper_jax.configuration import integrate_pos
from caliper_jax.ik import numerical
from caliper_jax.ik.chain import frame_pose
from caliper_jax.model import Model


def _float0(x):
    return np.zeros(np.shape(x), dtype=jax.dtypes.float0)


def solution_tangent(model: Model, q, target_T, converged, weights, free_v, dmodel, dtarget, *, frame: int,
                     opts: numerical.IKOptions):
    """dq* (nq,) of a solve that returned ``q`` (nq,) for ``target_T`` (4, 4), along the model
    tangent ``dmodel`` (a Model-shaped pytree) and the target tangent ``dtarget`` (4, 4). Zero when
    ``converged`` is False. ``free_v`` (nv,) bool; ``weights`` (6,) as in the solve."""
    dtype = q.dtype
    R, p = frame_pose(model, q, frame)
    reached = jnp.eye(4, dtype=dtype).at[:3, :3].set(R).at[:3, 3].set(p)
    target_eval = jnp.where(converged, target_T, jax.lax.stop_gradient(reached))

    def residual(m, T):
        return numerical.pose_error(m, q, frame, T[:3, :3], T[:3, 3], weights)[0]

    _, dr = jax.jvp(residual, (model, target_eval), (dmodel, dtarget))
    _, WJ, _, _ = numerical.pose_error(model, q, frame, target_eval[:3, :3], target_eval[:3, 3], weights)
    # columns that cannot move: locked joints and joints resting on a limit (active clamp)
    dof_q, lower_v, upper_v = numerical._dof_limits(model)
    simple = model.nq == model.nv and all(t in ("revolute", "prismatic") for t in model.jnt_type)
    qv = q if simple else q[dof_q]
    movable = free_v & (qv > lower_v) & (qv < upper_v)
    WJ = jnp.where(movable[None, :], WJ, 0.0)
    JJt, lam2 = numerical.damping(WJ, opts, weights > 0)
    A = JJt + lam2 * jnp.eye(6, dtype=dtype)
    dv = WJ.T @ jsl.cho_solve(jsl.cho_factor(A, lower=True), dr[:, None])[:, 0]
    dv = jnp.where(converged, dv, 0.0)
    if simple:
        return dv
    return jax.jvp(lambda v: integrate_pos(model, q, v), (jnp.zeros_like(dv),), (dv,))[1]


@lru_cache(maxsize=None)
def _differentiable_solve(frame: int, opts: numerical.IKOptions):
    """A custom_jvp of ``numerical.solve`` for one frame and solver settings."""

    @jax.custom_jvp
    def run(model, target_T, seed, key, free_v, free_q, weights):
        return numerical.solve(model, target_T, seed, key, free_v, free_q, weights, frame=frame, opts=opts)

    @run.defjvp
    def run_jvp(primals, tangents):
        model, target_T, _, _, free_v, _, weights = primals
        res = run(*primals)
        dq = solution_tangent(model, res.q, target_T, res.success, weights, free_v, tangents[0], tangents[1],
                              frame=frame, opts=opts)
        zero = jnp.zeros_like(res.pos_residual)
        out = numerical.IKResult(success=_float0(res.success), q=dq, pos_residual=zero, rot_residual=zero,
                                 iterations=_float0(res.iterations), restart=_float0(res.restart))
        return res, out

    return run


def solve_diff(model: Model, target_T, seed, key, free_v=None, free_q=None, weights=None, *, frame: int,
               opts: numerical.IKOptions | None = None) -> numerical.IKResult:
    """``numerical.solve`` (one target (4, 4) T_world_frame, seed (nq,), PRNG key) whose ``q`` is
    differentiable with respect to ``target_T`` and the Model's float leaves by the implicit
    function theorem (module docstring). ``success`` is the convergence flag: where it is False
    the derivative of q is zero. The residual outputs carry zero derivatives; seed, key, masks and
    weights are not differentiated. Pure: jit / vmap / grad at the caller."""
    dtype = model.dtype
    opts = numerical.IKOptions() if opts is None else opts
    free_v = jnp.ones(model.nv, bool) if free_v is None else jnp.asarray(free_v, bool)
    free_q = jnp.ones(model.nq, bool) if free_q is None else jnp.asarray(free_q, bool)
    weights = numerical.weights_from(opts, dtype) if weights is None else jnp.asarray(weights, dtype)
    run = _differentiable_solve(frame, opts)
    return run(model, jnp.asarray(target_T, dtype), jnp.asarray(seed, dtype), key, free_v, free_q, weights)


def twist_sensitivity(model: Model, q, target_T, converged, free_v=None, weights=None, *, frame: int,
                      opts: numerical.IKOptions | None = None):
    """(nq, 6): dq* / dxi for the target perturbed in its own axes, T*(xi) = T* exp(xi),
    xi = [v; w] -- the columns are ``solution_tangent`` along the six generators."""
    dtype = q.dtype
    opts = numerical.IKOptions() if opts is None else opts
    free_v = jnp.ones(model.nv, bool) if free_v is None else jnp.asarray(free_v, bool)
    weights = numerical.weights_from(opts, dtype) if weights is None else jnp.asarray(weights, dtype)
    target_T = jnp.asarray(target_T, dtype)
    zero_model = jax.tree_util.tree_map(jnp.zeros_like, model)

    def column(k):
        xi = jnp.zeros(6, dtype).at[k].set(1.0)
        w = xi[3:]
        hat = jnp.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]], dtype)
        gen = jnp.zeros((4, 4), dtype).at[:3, 3].set(xi[:3]).at[:3, :3].set(hat)
        return solution_tangent(model, q, target_T, converged, weights, free_v, zero_model, target_T @ gen,
                                frame=frame, opts=opts)

    return jax.vmap(column, out_axes=1)(jnp.arange(6))


__all__ = ["solution_tangent", "solve_diff", "twist_sensitivity"]
