"""Minimum-time timing of a FIXED path by the trajopt solver (augmented Lagrangian, damped
Newton inner steps): the cross-check of the dynamics trajopt's minimum-time objective against
TOPP-RA's time-optimal duration on the same path.

The path q(s) is sampled on a grid s_0 < ... < s_N. The decision variables are the squared path
speeds x_i = sd(s_i)^2 at the interior grid points (``x_i >= 0`` as constraints); x_0 and x_N
are the rest-to-rest end speeds (0). With ``u_i = (x_{i+1} - x_i) / (2 ds_i)`` (sdd constant on
interval i) the duration is

    T = sum_i 2 ds_i / (sqrt(x_i) + sqrt(x_{i+1})),

a convex function of x (Verscheure et al. 2009). The constraints are TOPP-RA's own rows
(:class:`caliper_jax.motion.PathConstraints`, ``lower <= a u + b x + c <= upper`` per grid
point) imposed on intervals 0..N-1 with that interval's u -- what
:func:`caliper_jax.motion.reachability.topp_ra` imposes -- each divided by the size of its
bound. Velocity, acceleration and torque rows all fit, so the problem TOPP-RA solves exactly by
reachability is solved here as a nonlinear program.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from caliper_jax.motion.reachability import PathConstraints
from caliper_jax.trajopt import auglag


def _rows(constraints: PathConstraints, n: int):
    a, b, c, lo, hi = (z[:n] for z in constraints)
    scale_hi = jnp.where(jnp.isfinite(hi), jnp.maximum(jnp.abs(hi), 1e-6), 1.0)
    scale_lo = jnp.where(jnp.isfinite(lo), jnp.maximum(jnp.abs(lo), 1e-6), 1.0)
    return a, b, c, lo, hi, scale_lo, scale_hi


def duration(gridpoints, x):
    """T (scalar) of squared path speeds ``x`` (N + 1,) on ``gridpoints`` (N + 1,)."""
    ds = gridpoints[1:] - gridpoints[:-1]
    floor = jnp.finfo(x.dtype).eps
    pos = x > floor
    r = jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), jnp.sqrt(floor))  # NaN-free at x = 0
    return jnp.sum(2.0 * ds / (r[1:] + r[:-1]))


def initial_speed(gridpoints, constraints: PathConstraints):
    """A feasible-ish start: x_i = 0.25 min over the velocity-like rows (a = 0) of (upper - c) / b,
    tapered to 0 at both ends by sin(pi s) (interior points only, (N - 1,))."""
    s = jnp.asarray(gridpoints)
    a, b, c, _, hi = constraints
    vel = (jnp.abs(a) <= 0) & (b > 0) & jnp.isfinite(hi)
    cap = jnp.min(jnp.where(vel, (hi - c) / jnp.where(vel, b, 1.0), jnp.inf), axis=1)
    cap = jnp.where(jnp.isfinite(cap), cap, 1.0)
    u = (s - s[0]) / (s[-1] - s[0])
    return (0.25 * cap * jnp.sin(jnp.pi * u) + 1e-6)[1:-1]


def problem(gridpoints, constraints: PathConstraints, x_start=0.0, x_end=0.0):
    """(f, c, g, assemble) over y (N - 1,): the duration, no equalities, the scaled rows <= 0, and
    y -> x (N + 1,)."""
    s = jnp.asarray(gridpoints)
    n = s.shape[0] - 1
    ds = s[1:] - s[:-1]
    a, b, c, lo, hi, scale_lo, scale_hi = _rows(constraints, n)
    dt = s.dtype
    xs, xe = jnp.asarray(x_start, dt), jnp.asarray(x_end, dt)

    def assemble(y):
        return jnp.concatenate([xs[None], y, xe[None]])

    def f(y):
        return duration(s, assemble(y))

    def g(y):
        x = assemble(y)
        u = (x[1:] - x[:-1]) / (2.0 * ds)
        val = a * u[:, None] + b * x[:-1, None] + c
        up = jnp.where(jnp.isfinite(hi), (val - hi) / scale_hi, -1.0)
        down = jnp.where(jnp.isfinite(lo), (lo - val) / scale_lo, -1.0)
        return jnp.concatenate([up.ravel(), down.ravel(), -y])

    return f, (lambda y: jnp.zeros((0,), dt)), g, assemble


#: damped Newton on the dense Hessian (N - 1 variables), gentle penalty growth: on a 100-interval
#: collide_arm path it reached TOPP-RA's duration to 0.1% where 60 x 100 L-BFGS steps were 0.6% off
PATH_OPTIONS = auglag.ALOptions(outer=40, inner=20, rho0=1.0, rho_growth=2.0, rho_max=1e3, method="newton")


def time_optimal(gridpoints, constraints: PathConstraints, opts: auglag.ALOptions | None = None,
                 x_start=0.0, x_end=0.0):
    """Minimum-time squared speeds on a fixed path -> (x (N + 1,), T, max scaled row violation).
    Pure JAX (jit / vmap at the caller); ``opts`` default :data:`PATH_OPTIONS`."""
    opts = PATH_OPTIONS if opts is None else opts
    f, c, g, assemble = problem(gridpoints, constraints, x_start, x_end)
    y0 = initial_speed(gridpoints, constraints)
    res = auglag.solve(f, c, g, y0, opts)
    x = assemble(res.z)
    return x, duration(jnp.asarray(gridpoints), x), res.violation


time_optimal_jit = jax.jit(time_optimal, static_argnames=("opts",))

__all__ = ["PATH_OPTIONS", "duration", "initial_speed", "problem", "time_optimal", "time_optimal_jit"]
