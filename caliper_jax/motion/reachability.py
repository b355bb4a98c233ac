"""TOPP-RA: time-optimal path parameterisation by reachability analysis over a grid.

The path q(s) is sampled at grid points s_0 < ... < s_N. With x = sd^2 and u = sdd, every
constraint is linear per grid point i:  ``lower_i <= a_i u + b_i x + c_i <= upper_i`` (one row per
constraint, any number of rows), and x_{i+1} = x_i + 2 (s_{i+1} - s_i) u_i. Joint velocity,
joint acceleration and, later, joint torque limits all take this form:

* velocity: a = 0, b = q'^2, c = 0, in [-inf, vmax^2];
* acceleration: a = q', b = q'', c = 0, in [-amax, amax];
* torque: a = M q', b = M q'' + C(q, q') q', c = g(q), in [-effort, effort].

Backward pass: the controllable set K_i (an interval of x) is the projection onto x of the
2-variable polygon {(x, u): rows at i hold, x >= 0, x + 2 ds u in K_{i+1}}. The projection is
computed exactly by Fourier-Motzkin elimination of u: every pair (a row bounding u from above,
a row bounding u from below) gives one linear inequality in x. Forward pass: from x_0, take the
largest u that keeps x_{i+1} inside K_{i+1}. Both passes are ``lax.scan``; batch paths with vmap.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from caliper_jax.motion.spline import CubicSpline, PathSamples, spline_eval

Array = jnp.ndarray


class PathConstraints(NamedTuple):
    """Rows ``lower <= a * sdd + b * sd^2 + c <= upper``, each field of shape (N + 1, m)."""

    a: Array
    b: Array
    c: Array
    lower: Array
    upper: Array


class ToppRAResult(NamedTuple):
    """Output on the grid. ``sdd[i]`` is the constant path acceleration on [s_i, s_{i+1}].

    ``feasible`` is False when some controllable set was empty (``fail_index`` is that grid
    index, else -1) or the start speed lies outside K_0 (index 0). Values stay finite either way.
    """

    s: Array  # (N + 1,)
    sd: Array  # (N + 1,)
    sdd: Array  # (N,)
    t: Array  # (N + 1,) time stamps, t[0] = 0
    feasible: Array  # bool
    fail_index: Array  # int32, -1 when feasible
    k_lower: Array  # (N + 1,) controllable sets, in x = sd^2
    k_upper: Array

    @property
    def duration(self) -> Array:
        return self.t[..., -1]


def velocity_constraints(qs, vmax) -> PathConstraints:
    """|q'(s) sd| <= vmax per dof, from q' samples (N + 1, ndof)."""
    qs = jnp.asarray(qs)
    vmax = jnp.broadcast_to(jnp.asarray(vmax, qs.dtype), qs.shape)
    zero = jnp.zeros_like(qs)
    return PathConstraints(zero, qs * qs, zero, jnp.full_like(qs, -jnp.inf), vmax * vmax)


def acceleration_constraints(qs, qss, amax) -> PathConstraints:
    """|q'(s) sdd + q''(s) sd^2| <= amax per dof, from q', q'' samples (N + 1, ndof)."""
    qs = jnp.asarray(qs)
    amax = jnp.broadcast_to(jnp.asarray(amax, qs.dtype), qs.shape)
    return PathConstraints(qs, jnp.asarray(qss, qs.dtype), jnp.zeros_like(qs), -amax, amax)


def stack_constraints(*groups: PathConstraints) -> PathConstraints:
    """Concatenate constraint groups along the row axis."""
    return PathConstraints(*(jnp.concatenate(parts, axis=-1) for parts in zip(*groups, strict=True)))


def interpolate_constraints(gridpoints, constraints: PathConstraints) -> PathConstraints:
    """First-order interpolation of the rows (toppra's "Interpolation" discretisation).

    Collocation imposes each row at its grid point only; inside interval i the path keeps
    ``sdd = u_i`` while ``sd^2`` grows linearly, so a row can be violated just before s_{i+1}
    (most where u switches sign, as in bang-bang profiles). Here interval i also gets the rows of
    point i + 1 evaluated with (x_i + 2 ds_i u_i, u_i):
    ``(a_{i+1} + 2 ds_i b_{i+1}) u_i + b_{i+1} x_i + c_{i+1}``. Rows double; the last grid
    point repeats its own rows (the solver does not use them)."""
    s = jnp.asarray(gridpoints)
    a, b, c, lo, hi = (jnp.asarray(z, s.dtype) for z in constraints)
    ds = (s[1:] - s[:-1])[:, None]
    nxt = lambda z: jnp.concatenate([z[1:], z[-1:]], axis=0)
    a_next = jnp.concatenate([a[1:] + 2.0 * ds * b[1:], a[-1:]], axis=0)
    return PathConstraints(*(jnp.concatenate(pair, axis=-1) for pair in
                             ((a, a_next), (b, nxt(b)), (c, nxt(c)), (lo, nxt(lo)), (hi, nxt(hi)))))


def _tiny(dtype) -> float:
    return 64.0 * float(jnp.finfo(dtype).eps)


def _huge(dtype) -> float:
    return float(jnp.finfo(dtype).max) ** 0.5


def _half_planes(a, b, c, lo, hi, huge):
    """Each row as two half-planes alpha u + beta x <= h: one with alpha >= 0 (bounds u from
    above) and one with alpha <= 0 (bounds u from below). Infinite bounds become ``huge``."""
    h_hi = jnp.where(jnp.isfinite(hi), hi - c, huge)
    h_lo = jnp.where(jnp.isfinite(lo), c - lo, huge)
    up = a >= 0.0
    ua, ub, uh = jnp.where(up, a, -a), jnp.where(up, b, -b), jnp.where(up, h_hi, h_lo)
    la, lb, lh = jnp.where(up, -a, a), jnp.where(up, -b, b), jnp.where(up, h_lo, h_hi)
    return (ua, ub, uh), (la, lb, lh)


def _project(upper, lower, tol):
    """Exact x-interval of {(x, u): upper and lower half-planes} by Fourier-Motzkin on u.

    Returns (x_lo, x_hi, ok); ok is False when two parallel rows contradict each other.
    """
    ua, ub, uh = (z[:, None] for z in upper)
    la, lb, lh = (z[None, :] for z in lower)
    g = (-la) * ub + ua * lb
    r = (-la) * uh + ua * lh
    g_scale = jnp.abs(la * ub) + jnp.abs(ua * lb)
    r_scale = jnp.abs(la * uh) + jnp.abs(ua * lh)
    flat = jnp.abs(g) <= tol * g_scale
    g_safe = jnp.where(flat, 1.0, g)
    bound = r / g_safe
    x_hi = jnp.min(jnp.where(~flat & (g > 0.0), bound, jnp.inf))
    x_lo = jnp.max(jnp.where(~flat & (g < 0.0), bound, -jnp.inf))
    ok = ~jnp.any(flat & (r < -tol * r_scale))
    return x_lo, x_hi, ok


def topp_ra(gridpoints, constraints: PathConstraints, sd_start=0.0, sd_end=0.0) -> ToppRAResult:
    """Time-optimal sd(s) on ``gridpoints`` (N + 1,) under ``constraints`` (rows per grid point).

    Constraints are imposed at the grid points ("collocation"). ``sd_start``/``sd_end`` are the
    path speeds at the ends (0: rest to rest). One path per call; ``jax.vmap`` for many.
    """
    s = jnp.asarray(gridpoints)
    dtype = s.dtype
    tol = _tiny(dtype)
    huge = _huge(dtype)
    a, b, c, lo, hi = (jnp.asarray(z, dtype) for z in constraints)
    ds = s[1:] - s[:-1]
    x_end = jnp.asarray(sd_end, dtype) ** 2
    x_start = jnp.asarray(sd_start, dtype) ** 2
    n = ds.shape[0]

    # Extra rows at every grid point: 0 <= x <= huge.
    zrow = jnp.zeros((n + 1, 1), dtype)
    a = jnp.concatenate([a, zrow], axis=1)
    b = jnp.concatenate([b, zrow + 1.0], axis=1)
    c = jnp.concatenate([c, zrow], axis=1)
    lo = jnp.concatenate([lo, zrow], axis=1)
    hi = jnp.concatenate([hi, zrow + huge], axis=1)
    up_rows, low_rows = _half_planes(a, b, c, lo, hi, huge)

    def backward(carry, inp):
        k_lo, k_hi, fail = carry
        (ua, ub, uh), (la, lb, lh), d, i = inp
        two_d = 2.0 * d
        # x + 2 ds u in [k_lo, k_hi]: one half-plane each way.
        upper = (jnp.append(ua, two_d), jnp.append(ub, 1.0), jnp.append(uh, k_hi))
        lower = (jnp.append(la, -two_d), jnp.append(lb, -1.0), jnp.append(lh, -k_lo))
        x_lo, x_hi, ok = _project(upper, lower, tol)
        x_lo = jnp.maximum(x_lo, 0.0)
        slack = tol * jnp.maximum(jnp.maximum(jnp.abs(x_hi), jnp.abs(x_lo)), 1.0)
        ok = ok & (x_lo <= x_hi + slack)
        x_lo = jnp.minimum(x_lo, x_hi)
        fail = jnp.where((fail < 0) & ~ok, i, fail)
        x_lo = jnp.where(ok, x_lo, 0.0)
        x_hi = jnp.where(ok, jnp.maximum(x_hi, 0.0), 0.0)
        return (x_lo, x_hi, fail), (x_lo, x_hi)

    rows_i = jax.tree_util.tree_map(lambda z: z[:-1], (up_rows, low_rows))
    idx = jnp.arange(n, dtype=jnp.int32)
    init = (x_end, x_end, jnp.asarray(-1, jnp.int32))
    (_, _, fail), (klo, khi) = jax.lax.scan(backward, init, (*rows_i, ds, idx), reverse=True)
    k_lower = jnp.append(klo, x_end)
    k_upper = jnp.append(khi, x_end)

    start_slack = tol * jnp.maximum(k_upper[0], 1.0)
    start_ok = (x_start >= k_lower[0] - start_slack) & (x_start <= k_upper[0] + start_slack)
    fail = jnp.where((fail < 0) & ~start_ok, 0, fail)
    x0 = jnp.clip(x_start, k_lower[0], k_upper[0])

    def forward(x, inp):
        (ua, ub, uh), d, k_lo, k_hi = inp
        pos = ua > 0.0
        room = uh - ub * x
        # A negative room only by rounding (x sits on an x-only-like row) counts as zero, so a
        # row with a tiny positive alpha cannot turn rounding noise into a huge negative bound.
        room = jnp.where(room > -tol * (jnp.abs(uh) + jnp.abs(ub * x)), jnp.maximum(room, 0.0), room)
        u_rows = jnp.min(jnp.where(pos, room / jnp.where(pos, ua, 1.0), jnp.inf))
        u = jnp.minimum(u_rows, (k_hi - x) / (2.0 * d))
        x_next = jnp.clip(x + 2.0 * d * u, k_lo, k_hi)
        return x_next, (x_next, (x_next - x) / (2.0 * d))

    _, (x_rest, sdd) = jax.lax.scan(forward, x0, (rows_i[0], ds, k_lower[1:], k_upper[1:]))
    x = jnp.concatenate([x0[None], x_rest])
    sd = jnp.sqrt(jnp.maximum(x, 0.0))
    den = sd[1:] + sd[:-1]
    stalled = (den <= 0.0) & (ds > 0.0)
    dt = jnp.where(den > 0.0, 2.0 * ds / jnp.where(den > 0.0, den, 1.0), 0.0)
    t = jnp.concatenate([jnp.zeros((1,), dtype), jnp.cumsum(dt)])
    first_stall = jnp.argmax(stalled).astype(jnp.int32)
    fail = jnp.where((fail < 0) & jnp.any(stalled), first_stall, fail)
    return ToppRAResult(s, sd, sdd, t, fail < 0, fail, k_lower, k_upper)


def joint_limit_constraints(path: PathSamples, limits) -> PathConstraints:
    """Velocity and acceleration rows for per-dof ``limits.vmax``/``limits.amax`` on a sampled path."""
    return stack_constraints(
        velocity_constraints(path.qs, limits.vmax),
        acceleration_constraints(path.qs, path.qss, limits.amax),
    )


def topp_ra_spline(spline: CubicSpline, limits, n_grid: int, extra=None) -> tuple[ToppRAResult, PathSamples]:
    """TOPP-RA over ``n_grid`` uniform intervals of a spline, joint velocity and acceleration
    limits, plus optional ``extra(path) -> PathConstraints`` rows (e.g. torque). ``n_grid`` static."""
    grid = jnp.linspace(spline.knots[0], spline.knots[-1], n_grid + 1)
    path = spline_eval(spline, grid)
    cons = joint_limit_constraints(path, limits)
    if extra is not None:
        cons = stack_constraints(cons, extra(path))
    return topp_ra(grid, cons), path


def joint_rows(path: PathSamples, result: ToppRAResult):
    """Joint (times, q, qd, qdd) at the grid points; qdd uses the interval's sdd (last: previous)."""
    u = jnp.concatenate([result.sdd, result.sdd[-1:]])
    sd = result.sd[:, None]
    qd = path.qs * sd
    qdd = path.qs * u[:, None] + path.qss * sd * sd
    return result.t, path.q, qd, qdd
